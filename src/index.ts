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
  ASYNC_MIN_UNITS,
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
export {
  ResourceLedger,
  restoreResources,
  describeLocation,
  DEFAULT_RESOURCE_TEMPLATE,
  DEFAULT_RESOURCE_SETTINGS,
  LEDGER_FORMAT,
  LEDGER_VERSION,
  type ResourceBlock,
  type TextBlock,
  type ContentBlock,
  type DeliveryLocation,
  type DeliveryRecord,
  type DeliveryReason,
  type ToolDedupSettings,
  type ResourceDedupSettings,
  type ResourceLedgerOptions,
  type ResourceReferenceInfo,
  type Attachment,
  type AttachmentRecord,
  type ToolResponse,
  type ResourceDecision,
  type ResourceReport,
  type ProcessResult,
  type ResourceLedgerTotals,
  type ResourceLedgerJSON,
} from './stages/resources.js';
export { parseResourceConfig, loadResourceConfig } from './stages/resources-config.js';
export {
  dedupeSources,
  dedupeFindings,
  dedupeResearch,
  canonicalizeUrl,
  findingKey,
  researchStageReport,
  FINDINGS_NORMALIZATION_VERSION,
  type Source,
  type DedupeSourcesOptions,
  type DedupeSourcesResult,
  type PrunedSource,
  type DedupeFindingsOptions,
  type DedupeFindingsResult,
  type FindingDuplicate,
  type StageReport,
  type StageReportItem,
} from './stages/research.js';
export {
  countTokens,
  countTokensBatch,
  tokenCounter,
  DEFAULT_ENCODING,
  type TokenCounter,
  type TokenEncoding,
  type TokenCounterOption,
} from './tokens.js';
export {
  IngestIndex,
  openStore,
  type IngestItem,
  type IngestResult,
  type NewIngestResult,
  type ExactDuplicateResult,
  type NearDuplicateResult,
  type NearDuplicateOptions,
  type IngestIndexOptions,
  type NamespaceOptions,
  type IngestStore,
} from './ingest/index.js';
export * from './memory/index.js';
