// The running catalogue: loaded at start (a bad document stops the start), then watched and re-read on SIGHUP; a
// refused document keeps the last good catalogue (logged, counted), and a good one replaces it whole.
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { watchFile } from '../../config/watch-file';
import type { Catalogue } from './catalogue';
import { CatalogueError, type CatalogueOptions, parseCatalogue } from './load-catalogue';

export interface CatalogueSource {
  /** The catalogue in force; the same object until a reload replaces it. */
  current(): Catalogue;
  /** Re-reads the file now (SIGHUP); false when it was refused and the previous catalogue stays. */
  reload(): boolean;
  /** The operationIds of the catalogue in force. */
  operationIds(): readonly string[];
  /** Every operationId served since start (the ledger counts a request of an operation removed meanwhile). */
  readonly served: Pick<ReadonlySet<string>, 'has'>;
  /** Told of each new catalogue; returns how to stop. */
  onChange(listener: (catalogue: Catalogue) => void): () => void;
  close(): void;
}

export interface CatalogueSourceOptions extends CatalogueOptions {
  readonly logger: Logger;
  /** Counts refused reloads by reason (the metric's owner hands it in). */
  readonly refused?: { inc(labels: { reason: string }): void };
  /** Watch the file (fs.watch on its directory plus a periodic stat) and reload on change. */
  readonly watch?: boolean;
  readonly pollIntervalMs?: number;
}

const formatOf = (file: string) => (/\.ya?ml$/i.test(file) ? 'yaml' : 'json');

/** Loads the file; a bad document at start throws CatalogueError naming every problem. */
export function createCatalogueSource(file: string, options: CatalogueSourceOptions): CatalogueSource {
  const { logger } = options;
  const read = () => readFileSync(file, 'utf8');
  let lastText: string;
  try {
    lastText = read();
  } catch (error) {
    throw new CatalogueError(file, [`cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`]);
  }
  let catalogue = parseCatalogue(lastText, formatOf(file), options, file);
  let refusedText: string | undefined;
  const served = new Set(catalogue.operations.map((operation) => operation.id));
  const listeners = new Set<(catalogue: Catalogue) => void>();

  function reload(): boolean {
    let text: string;
    try {
      text = read();
    } catch (error) {
      // Mid-swap (a ConfigMap's symlink flip) or deleted: keep serving; the next event or poll tries again.
      options.refused?.inc({ reason: 'unreadable' });
      logger.error({ file, code: (error as NodeJS.ErrnoException).code }, 'operations catalogue unreadable');
      return false;
    }
    if (text === lastText) return true;
    if (text === refusedText) return false;
    let next: Catalogue;
    try {
      next = parseCatalogue(text, formatOf(file), options, file);
    } catch (error) {
      refusedText = text;
      options.refused?.inc({ reason: 'invalid' });
      const problems = error instanceof CatalogueError ? error.problems : [(error as Error).message];
      logger.error(
        { file, problems },
        'operations catalogue reload refused; the last good one keeps serving',
      );
      return false;
    }
    lastText = text;
    refusedText = undefined;
    catalogue = next;
    for (const operation of next.operations) served.add(operation.id);
    logger.info(
      { file, operations: next.operations.map((operation) => operation.id) },
      'operations catalogue reloaded',
    );
    for (const listener of listeners) listener(next);
    return true;
  }

  const stopWatching = options.watch ? watchFile(file, options.pollIntervalMs ?? 2_000, reload) : undefined;
  return {
    current: () => catalogue,
    reload,
    operationIds: () => catalogue.operations.map((operation) => operation.id),
    served,
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      stopWatching?.();
      listeners.clear();
    },
  };
}
