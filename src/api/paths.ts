import { UserError } from '../util/errors.js';
import { ROUTES, ROUTE_NAMES, type Method, type Params, type RouteName } from './contract.js';

/** Path patterns of the contract: filled in by the client, matched by the daemon. */

/** A route's path with its parameters URI-encoded into it. */
export function fillPath<K extends RouteName>(route: K, params: Params<K>): string {
  const values: Readonly<Record<string, string>> = params;
  return ROUTES[route].path.replace(/:(\w+)/g, (_, name: string) => encodeURIComponent(values[name]));
}

interface Compiled {
  name: RouteName;
  method: Method;
  re: RegExp;
  params: string[];
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function compile(name: RouteName): Compiled {
  const { method, path } = ROUTES[name];
  const params: string[] = [];
  const source = path.split('/').map((seg) => (seg.startsWith(':') ? (params.push(seg.slice(1)), '([^/]+)') : escape(seg))).join('/');
  return { name, method, re: new RegExp(`^${source}$`), params };
}

// A literal segment beats a parameter: /prs/stats is the stats route, not PR "stats".
const TABLE = ROUTE_NAMES.map(compile).sort((a, b) => a.params.length - b.params.length);

export interface Match {
  name: RouteName;
  /** Decoded path parameters, by the names in the route's pattern. */
  params: Record<string, string>;
}

/** The route a request is for, or undefined (the caller answers 404). */
export function matchRoute(method: string, pathname: string): Match | undefined {
  for (const r of TABLE) {
    const m = r.method === method ? r.re.exec(pathname) : null;
    if (!m) continue;
    const params: Record<string, string> = {};
    r.params.forEach((p, i) => {
      try {
        params[p] = decodeURIComponent(m[i + 1]);
      } catch {
        throw new UserError(`the ${p} in the path is not valid URI encoding`);
      }
    });
    return { name: r.name, params };
  }
  return undefined;
}
