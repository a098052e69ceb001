/**
 * ctxdedup: exact, explainable, reversible deduplication for LLM contexts and agent memory.
 * @packageDocumentation
 */
export { sha256, groupExact } from './identity.js';
export {
  deduplicate,
  deduplicateWithReport,
  SMALL_BATCH,
  type ContextItem,
  type ScoredItem,
  type DeduplicateOptions,
  type DeduplicateReport,
  type RemovedItem,
} from './stages/deduplicate.js';
