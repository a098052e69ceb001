/**
 * ctxdedup: exact, explainable, reversible deduplication for LLM contexts and agent memory.
 *
 * This entry holds the stages and loads no optional package. The ingestion index is in
 * `ctxdedup/ingest`, memory deduplication in `ctxdedup/memory`, the HTTP server in
 * `ctxdedup/server` and the context-compression-engine compatible API in `ctxdedup/cce`.
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
  type WholeMessageDecision,
  type WholeMessageMarker,
} from './stages/messages.js';
export {
  expandMessages,
  DEFAULT_BLOCK_TEMPLATES,
  type BlockOptions,
  type BlockDecision,
  type BlockNumbering,
  type BlockReference,
  type BlocksMarker,
} from './stages/blocks.js';
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
  type ResourceStats,
  type ResourceReport,
  type ProcessResult,
  type ResourceLedgerTotals,
  type ResourceLedgerJSON,
  type McpContentBlock,
  type McpToolResult,
  type ToolCallInfo,
  type ToolResultStats,
  type ToolResultReport,
  type ToolResultProcessed,
} from './stages/resources.js';
export {
  dedupeOpenAIChat,
  dedupeAnthropicMessages,
  restoreOpenAIChat,
  restoreAnthropicMessages,
  type RequestDedupeResult,
  type OpenAIChatRequest,
  type OpenAIChatMessage,
  type OpenAIContentPart,
  type AnthropicMessagesRequest,
  type AnthropicMessage,
  type AnthropicBlock,
  type AdapterOptions,
  type AdapterDecision,
  type AdapterStats,
  type AdapterReport,
} from './adapters/requests.js';
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
