/**
 * Memory deduplication: the deduplicator, its stores, embedders and merge prompt.
 * @module
 */
export type { Memory, StoredMemory, NearestMemory, MemoryStore } from './store.js';
export { InMemoryStore } from './memory-store.js';
export { SqliteMemoryStore, MEMORY_SCHEMA_VERSION } from './sqlite-store.js';
export { ChromaMemoryStore, type ChromaMemoryStoreOptions } from './chroma-store.js';
export { InMemoryAuditLog, type AuditLog, type AuditEntry, type AuditRecord, type AuditAction } from './audit.js';
export {
  hashedEmbedding,
  HASHED_EMBEDDING_THRESHOLDS,
  type EmbedFunction,
  type CalibratedEmbedFunction,
  type HashedEmbeddingOptions,
  type RecommendedThresholds,
} from './embedding.js';
export { onnxEmbedding, ALL_MINILM_L6_V2_THRESHOLDS, type OnnxEmbeddingOptions, type OnnxEmbedFunction } from './onnx-embedding.js';
export { buildMergePrompt } from './prompt.js';
export { parseMemoryConfig, openMemoryStore, type MemoryConfig } from './config.js';
export {
  MemoryDeduplicator,
  SIMILARITY_TOLERANCE,
  type MemoryDeduplicatorOptions,
  type MergeFunction,
  type MergeContext,
  type MemoryDedupEvent,
  type MemoryLogger,
  type WriteDecision,
  type WriteResult,
  type DedupeAllOptions,
  type DeduplicateAllOptions,
  type ClusterAction,
  type ClusterReport,
  type BatchReport,
} from './deduplicator.js';
