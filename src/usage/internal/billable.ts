// What a provider answer is for the ledger and the quota: its class, and whether the provider bills it.

/** SPEC §11: 2xx, and 4xx other than 401, 403 and 429 (an account's `"billable"` may change the set later). */
export function isBillableStatus(status: number): boolean {
  if (status >= 200 && status < 300) return true;
  return status >= 400 && status < 500 && status !== 401 && status !== 403 && status !== 429;
}

/** The ledger column of a provider answer's class (1xx/3xx never end a call; counted with 2xx and 4xx if ever). */
export function answerColumn(status: number): 'answers2xx' | 'answers4xx' | 'answers5xx' {
  if (status >= 500) return 'answers5xx';
  if (status >= 400) return 'answers4xx';
  return 'answers2xx';
}
