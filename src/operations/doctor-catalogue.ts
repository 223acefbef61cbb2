// The doctor's look at OPERATIONS_FILE: the catalogue as the gateway would load it, every problem named.
import { CatalogueError, loadCatalogue } from '../catalogue';
import type { GatewayConfig } from '../config/gateway-config';
import type { DoctorStep } from './doctor';

const TITLE = 'operations catalogue';

export function catalogueStep(config: GatewayConfig): DoctorStep {
  const file = config.callers.operationsFile;
  try {
    const catalogue = loadCatalogue(file, { maxTimeoutMs: config.upstream.timeoutMs });
    const served = catalogue.operations.map(
      (operation) => `${operation.id} (${operation.method} ${operation.path})`,
    );
    const unserved =
      catalogue.unserved.length > 0 ? `; not served (no scope): ${catalogue.unserved.join(', ')}` : '';
    return {
      title: TITLE,
      state: served.length > 0 ? 'pass' : 'warn',
      detail: `${file}: ${served.length > 0 ? `serves ${served.join(', ')}` : 'serves nothing'}${unserved}`,
    };
  } catch (error) {
    if (!(error instanceof CatalogueError)) throw error;
    return {
      title: TITLE,
      state: 'fail',
      detail: error.message,
      fix: 'correct the document (docs/catalogue.md); a running gateway keeps its last good catalogue until then',
    };
  }
}
