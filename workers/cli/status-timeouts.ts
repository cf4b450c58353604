/** How long `status` waits for the workers to answer its status queries by default (all run at once; flow-status.ts). Its own module: the CLI's help text shows it without loading the Temporal client. */
export const DEFAULT_QUERY_TIMEOUT_MS = 2_000;
