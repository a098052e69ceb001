/**
 * Input validation shared by the stages. Every error names the offending path, e.g.
 * `scored[3].score is NaN`, and is thrown before any work or write happens.
 * @module
 */

/** Throws a `TypeError` naming `path`. */
export function typeError(path: string, problem: string): never {
  throw new TypeError(`${path} ${problem}`);
}

/** Throws a `RangeError` naming `path`. */
export function rangeError(path: string, problem: string): never {
  throw new RangeError(`${path} ${problem}`);
}

/**
 * Describes a value's type for an error message (`null`, `an array`, `a number`, ...). Never
 * throws, whatever the value (a revoked proxy included).
 */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  let array: boolean;
  try {
    array = Array.isArray(value);
  } catch {
    // A revoked proxy: `Array.isArray` throws, and so does every other operation on it.
    return 'a revoked proxy';
  }
  if (array) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/** Longest rendering {@link show} returns (longer ones are cut, with an ellipsis). */
const SHOW_MAX = 120;

/**
 * A value as an error message shows it: strings and plain data as JSON (`"x"`, `{"a":1}`),
 * numbers and booleans as JavaScript prints them, BigInts as `10n`, symbols as `Symbol(x)`.
 * Never throws: values JSON cannot render (cycles, BigInts inside objects, throwing getters or
 * `toJSON`, proxies) fall back to {@link describe}. Long renderings are cut.
 */
export function show(value: unknown): string {
  let text: string;
  try {
    switch (typeof value) {
      case 'string':
        text = JSON.stringify(value);
        break;
      case 'number':
      case 'boolean':
      case 'undefined':
        text = String(value);
        break;
      case 'bigint':
        text = `${value.toString()}n`;
        break;
      case 'symbol':
        text = value.toString();
        break;
      case 'function':
        return 'a function';
      default:
        text = (JSON.stringify(value) as string | undefined) ?? describe(value);
    }
  } catch {
    return describe(value);
  }
  return text.length > SHOW_MAX ? `${text.slice(0, SHOW_MAX - 1)}…` : text;
}

/** Asserts `value` is an array. */
export function expectArray(value: unknown, path: string): asserts value is unknown[] {
  if (!isArray(value)) typeError(path, `must be an array, got ${describe(value)}`);
}

/** Asserts `value` is a non-null object (not an array). */
export function expectObject(value: unknown, path: string): asserts value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || isArray(value) !== false) {
    typeError(path, `must be an object, got ${describe(value)}`);
  }
}

/** `Array.isArray(value)`, or `undefined` for a revoked proxy (on which it throws). */
function isArray(value: unknown): boolean | undefined {
  try {
    return Array.isArray(value);
  } catch {
    return undefined;
  }
}

/** `Array.isArray(value)`, and `false` for a revoked proxy (on which `Array.isArray` throws). */
export function isArraySafe(value: unknown): value is unknown[] {
  return isArray(value) === true;
}

/** Whether `value` is a revoked proxy (every operation on it throws). */
export function isRevokedProxy(value: unknown): boolean {
  return isArray(value) === undefined;
}

/**
 * `Array.isArray(value)`, and `true` for a revoked proxy: for hot loops that call
 * {@link expectObject} (which names the revoked proxy) only when this is true. @internal
 */
export function isArrayOrRevoked(value: unknown): boolean {
  return isArray(value) !== false;
}

/**
 * Asserts every own key of the options object `o` (at `path`) is one of `known`: a misspelled
 * option (`kep`, `minchars`) is a TypeError naming it, not silently ignored.
 */
export function expectKnownKeys(o: Record<string, unknown>, path: string, known: readonly string[]): void {
  for (const key of Object.keys(o)) {
    if (!known.includes(key)) typeError(`${path}.${key}`, `is not an option here (options: ${known.join(', ')})`);
  }
}

/** Asserts an optional options argument is an object or undefined. */
export function expectOptions(value: unknown, path = 'options'): void {
  if (value !== undefined) expectObject(value, path);
}

/** Asserts `value` is a boolean if present, and returns it or the default. */
export function optionalBoolean(value: unknown, path: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') typeError(path, `must be a boolean, got ${describe(value)}`);
  return value;
}

/** A number in [min, max] (NaN rejected), or the default when absent. */
export function optionalNumber(
  value: unknown,
  path: string,
  fallback: number,
  { min = -Infinity, max = Infinity, integer = false }: { min?: number; max?: number; integer?: boolean } = {},
): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number') typeError(path, `must be a number, got ${describe(value)}`);
  if (Number.isNaN(value)) rangeError(path, 'is NaN');
  if (integer && !Number.isInteger(value)) rangeError(path, `must be an integer, got ${value}`);
  if (value < min || value > max) rangeError(path, `must be in [${min}, ${max}], got ${value}`);
  return value;
}

/**
 * Stores `value` under `key` as an own, enumerable property, even for keys such as `__proto__`
 * that plain assignment would treat specially.
 */
export function setOwn<V>(record: Record<string, V>, key: string, value: V): void {
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
}

/** An array of strings, or the default when absent. */
export function optionalStrings(value: unknown, path: string, fallback: readonly string[]): string[] {
  if (value === undefined) return [...fallback];
  expectArray(value, path);
  // An indexed loop, not forEach: holes in sparse arrays must be reported too.
  for (let i = 0; i < value.length; i++) {
    const v: unknown = value[i];
    if (typeof v !== 'string') typeError(`${path}[${i}]`, `must be a string, got ${describe(v)}`);
  }
  return value as string[];
}

/**
 * The value of an option that has a deprecated alias: `value` (validated, at `path`) or, when it
 * is absent, `aliasValue` (validated, at `aliasPath`). Both given must agree: one never silently
 * overrides the other.
 */
export function aliased<T>(value: T | undefined, path: string, aliasValue: T | undefined, aliasPath: string): T | undefined {
  if (aliasValue === undefined) return value;
  if (value === undefined) return aliasValue;
  if (!Object.is(value, aliasValue)) typeError(aliasPath, `is a deprecated alias of ${path} and disagrees with it: ${show(aliasValue)} vs ${show(value)}`);
  return value;
}
