/**
 * The body fields a route takes, as a small schema the daemon checks at run time and TypeScript turns
 * into the body's type (BodyOf), so the check and the type cannot drift apart.
 */

/** A file carried in a request (nas memory import): its local name and its bytes in base64. */
export interface FileUpload {
  name: string;
  content: string;
}

/**
 * `string`: a non-empty string, required. A trailing `?` marks an optional field: absent, null or (for
 * strings) empty all mean "not given". `strings`: a list of strings; `files`: a list of FileUpload.
 */
export type FieldKind = 'string' | 'string?' | 'number?' | 'boolean?' | 'strings?' | 'files';

/** A field whose mistake is better explained in the CLI's words (e.g. "--budget must be ..."). */
export interface FieldRule {
  kind: FieldKind;
  message: string;
}

export type Field = FieldKind | FieldRule;
export type Schema = Readonly<Record<string, Field>>;

type KindOf<F> = F extends FieldRule ? F['kind'] : F;

type TypeOf<K> =
  K extends 'string' | 'string?' ? string
    : K extends 'number?' ? number
      : K extends 'boolean?' ? boolean
        : K extends 'strings?' ? string[]
          : K extends 'files' ? FileUpload[]
            : never;

type OptionalNames<S> = { [N in keyof S]: KindOf<S[N]> extends `${string}?` ? N : never }[keyof S];

/** Flattens an intersection so editors show one object type. */
type Flat<T> = { [K in keyof T]: T[K] };

/** The body type a schema describes. */
export type BodyOf<S> = Flat<
  { [N in Exclude<keyof S, OptionalNames<S>>]: TypeOf<KindOf<S[N]>> } & { [N in OptionalNames<S>]?: TypeOf<KindOf<S[N]>> }
>;

/** The `:name` segments of a path pattern. */
type ParamNames<P extends string> = P extends `${string}:${infer Rest}`
  ? Rest extends `${infer Name}/${infer Tail}` ? Name | ParamNames<Tail> : Rest
  : never;

/** The path parameters a pattern such as `/v1/homes/:role/prs/:id` takes: `{ role: string; id: string }`. */
export type PathParams<P extends string> = { [N in ParamNames<P>]: string };
