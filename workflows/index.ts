// The workflow bundle's entry: every workflow a kafka-flow-temporal worker registers.
export { partitionWorkflow } from './partition-workflow';
