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
export {
  dedupeMessages,
  dedupeMessagesAsync,
  restoreMessages,
  DEFAULT_TEMPLATES,
  type Message,
  type DedupeMessagesOptions,
  type DedupeMessagesResult,
  type MessageDecision,
  type MessageDedupStats,
  type ReferenceInfo,
  type ReferenceTemplates,
  type ReplacementMarker,
} from './stages/messages.js';
