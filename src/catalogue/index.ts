// The operations catalogue (SPEC §12): what the gateway serves, declared in OPERATIONS_FILE, compiled once per load.
// Below routes/ so that forwarding, accounts and the usage ledger can read it too.

export type { AnswerFilter } from './internal/answer-filter';
export type { Catalogue, CatalogueOperation, OperationMethod } from './internal/catalogue';
export { type CatalogueSource, createCatalogueSource } from './internal/catalogue-source';
export { EXTENSION_SCHEMA, type GatewayExtension, SCOPE_PATTERN } from './internal/extension-schema';
export { CatalogueError, jsonSchemaOf, loadCatalogue, parseCatalogue } from './internal/load-catalogue';
export type { ValidRequest } from './internal/request-validator';
