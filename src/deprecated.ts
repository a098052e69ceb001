/**
 * Deprecated names on result objects: the old name stays readable for existing callers, as a
 * non-enumerable property, so it is absent from JSON, spreads and equality checks (the new name
 * is the one that is part of the data).
 * @internal
 * @module
 */

/** Defines `target[alias]` as a non-enumerable, read-only `value`; returns `target`. @internal */
export function deprecatedAlias<T extends object>(target: T, alias: string, value: unknown): T {
  Object.defineProperty(target, alias, { value, enumerable: false, writable: false, configurable: true });
  return target;
}
