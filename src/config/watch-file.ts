// Watching a configuration file that is edited in place, replaced by an editor or swapped by a Kubernetes ConfigMap:
// the client registry and the accounts file are both reloaded this way.
import { type FSWatcher, statSync, watch } from 'node:fs';
import { basename, dirname } from 'node:path';

/** Calls `changed` (debounced) when the file may have changed; returns how to stop watching. */
export function watchFile(file: string, pollIntervalMs: number, changed: () => void): () => void {
  let watcher: FSWatcher | undefined;
  let debounce: NodeJS.Timeout | undefined;
  const schedule = () => {
    clearTimeout(debounce);
    debounce = setTimeout(changed, 50);
    debounce.unref();
  };
  // Watch the directory, not the file: editors replace files and Kubernetes ConfigMaps swap a `..data`
  // symlink, both of which end a watch on the file itself. Any event there just triggers a content compare.
  const name = basename(file);
  try {
    watcher = watch(dirname(file), { persistent: false }, (_event, changedName) => {
      if (!changedName || changedName === name || changedName.startsWith('..')) schedule();
    });
    watcher.on('error', () => {
      watcher?.close();
      watcher = undefined;
    });
  } catch {
    // Some file systems do not support watching; the poll below still notices changes.
  }
  let signature = statSignature(file);
  const poller = setInterval(() => {
    const current = statSignature(file);
    if (current !== signature) {
      signature = current;
      schedule();
    }
  }, pollIntervalMs);
  poller.unref();
  return () => {
    watcher?.close();
    clearInterval(poller);
    clearTimeout(debounce);
  };
}

/** Inode, size and mtime of the file the path resolves to (stat follows symlinks, so a swap changes it). */
function statSignature(file: string): string {
  try {
    const stat = statSync(file);
    return `${stat.ino}:${stat.size}:${stat.mtimeMs}`;
  } catch {
    return 'missing';
  }
}
