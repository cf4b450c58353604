export { InMemoryJournalStore } from './in-memory-journal-store';
export { InMemoryKeyStore } from './in-memory-key-store';
export { InMemoryOffsetCommitter } from './in-memory-offset-committer';
export { InMemorySnapshotStore, type InMemorySnapshotStoreOptions } from './in-memory-snapshot-store';
export { InMemoryBackend } from './in-memory-backend';
export { InMemoryOutputSender } from './in-memory-output-sender';
