/**
 * The bucket hash of context-compression-engine's exact pass (its README §3/§6, described in
 * shared/golden/cce/README.md): 32-bit djb2 (start 5381, `h * 33 + unit` mod 2^32) over the
 * UTF-16 units of `` `${length}:${content}` ``. Used by `ctxdedup/cce` for CCE's group order and
 * by the benchmarks' plain-JS reference of CCE's rules. @internal
 * @module
 */

/**
 * djb2 of `` `${content.length}:${content}` ``. The length prefix is hashed on its own, so the
 * content is never copied into a new string.
 */
export function djb2Bucket(content: string): number {
  const prefix = `${content.length}:`;
  let h = 5381;
  for (let i = 0; i < prefix.length; i++) h = (Math.imul(h, 33) + prefix.charCodeAt(i)) >>> 0;
  for (let i = 0; i < content.length; i++) h = (Math.imul(h, 33) + content.charCodeAt(i)) >>> 0;
  return h;
}
