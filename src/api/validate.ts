import { UserError } from '../util/errors.js';
import { ROUTES, type Body, type RouteName } from './contract.js';
import type { Field, FieldKind, FileUpload, Schema } from './schema.js';

/**
 * Request bodies checked against their route's schema before any handler runs: a malformed request gets a
 * 400 that names the field, and handlers get the declared types (empty optional strings as absent).
 */

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const WANT: Record<FieldKind, string> = {
  'string': 'a non-empty string',
  'string?': 'a string',
  'number?': 'a number',
  'boolean?': 'true or false',
  'strings?': 'a list of strings',
  'files': 'a list of {name, content} (content in base64)',
};

function fail(name: string, field: Field): never {
  throw new UserError(typeof field === 'string' ? `body.${name} must be ${WANT[field]}` : `body.${name}: ${field.message}`);
}

/** One field's value as its kind wants it, or undefined for an optional field not given. */
function field(name: string, spec: Field, v: unknown): unknown {
  const kind = typeof spec === 'string' ? spec : spec.kind;
  const optional = kind.endsWith('?');
  if (optional && (v === undefined || v === null)) return undefined;
  switch (kind) {
    case 'string':
      if (typeof v === 'string' && v !== '') return v;
      break;
    case 'string?':
      if (typeof v === 'string') return v === '' ? undefined : v;
      break;
    case 'number?':
      if (typeof v === 'number') return v;
      break;
    case 'boolean?':
      if (typeof v === 'boolean') return v;
      break;
    case 'strings?':
      if (Array.isArray(v) && v.every((s) => typeof s === 'string')) return v;
      break;
    case 'files': {
      if (!Array.isArray(v)) break;
      const files: FileUpload[] = [];
      v.forEach((f: unknown, i) => {
        const at = `body.${name}[${i}]`;
        if (!isObject(f)) throw new UserError(`${at} must be an object {name, content}`);
        if (typeof f.name !== 'string' || f.name === '') throw new UserError(`${at}.name must be a non-empty string`);
        if (typeof f.content !== 'string') throw new UserError(`${at}.content must be a string (base64)`);
        files.push({ name: f.name, content: f.content });
      });
      return files;
    }
  }
  return fail(name, spec);
}

/** A body checked against a schema: unknown fields are refused too, so a misspelt one is not silently dropped. */
export function checkBody(schema: Schema, body: unknown, where: string): Record<string, unknown> {
  if (!isObject(body)) throw new UserError('request body is not a JSON object');
  for (const name of Object.keys(body)) {
    if (!Object.hasOwn(schema, name)) {
      const takes = Object.keys(schema);
      throw new UserError(`body.${name} is not a field of ${where} (it takes ${takes.length ? takes.join(', ') : 'none'})`);
    }
  }
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(schema)) {
    const v = field(name, spec, body[name]);
    if (v !== undefined) out[name] = v;
  }
  return out;
}

/** The body of a request for `route`, as its handler's type. */
export function validateBody<K extends RouteName>(route: K, body: unknown): Body<K> {
  const { method, path, body: schema } = ROUTES[route];
  // checkBody has just established every field's type from the same schema the type is derived from.
  return checkBody(schema, body, `${method} ${path}`) as Body<K>;
}
