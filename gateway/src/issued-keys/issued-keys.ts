/**
 * Every issued key's hash, in a filter (digest-filter.ts), so that a key that
 * was never issued is answered 401 from memory, without a store lookup, and
 * only such keys count against the failed-authentication throttle. "Issued"
 * means ever issued: revoked, expired, rolled-away and deleted keys (their
 * tombstones) are in it too, and get their 401 from the stores as before.
 *
 * Loaded at start from Postgres, after the invalidation log follower has
 * taken its first snapshot: every key committed before that snapshot is read
 * by the load, every later one arrives as a `created` entry of the log (or a
 * Redis message), which a key's creation waits for on every live replica as a
 * revoke does. The filter vouches that a key was never issued only once it is
 * loaded and while the replica is current with the log; otherwise a key
 * outside it is looked up, under the global budget for unknown keys.
 */
import { withDeadline } from '@scoped/shared/deadline'
import type { Pool } from '@scoped/shared/db'
import type { Logger } from '@scoped/shared/logger'
import { DigestFilter } from './digest-filter.js'

/** What the filter says of a key: in it, never issued (answer 401 from memory), or unsure (look it up under the budget). */
export type IssuedVerdict = 'issued' | 'never-issued' | 'unsure'

/** Hashes read per statement at start: each page is one indexed range scan. */
const PAGE = 20_000
/** One statement's limit: a Postgres that does not answer is retried, not waited for. */
const STATEMENT_TIMEOUT_MS = 10_000
const RETRY_MS = 1_000

export interface IssuedKeysDeps {
  pool: Pool
  log: Logger
  /** Whether this replica is current with the invalidation log now (the follower). */
  current: () => boolean
  /** Whether the follower has taken its first snapshot, so that the load misses nothing committed after it. */
  following: () => boolean
}

export interface LoadReport {
  keys: number
  ms: number
}

export class IssuedKeys {
  private filter = new DigestFilter()
  /** Hashes added before the filter was sized for the load, to carry over into the sized one. */
  private early: string[] | undefined = []
  private loadedAt: number | undefined
  private stopped = false
  private timer: NodeJS.Timeout | undefined
  private loading: Promise<void> | undefined
  /** The last load's figures, for the log and readiness details. */
  report: LoadReport | undefined

  constructor(private readonly deps: IssuedKeysDeps) {}

  /** Whether every key issued before the start is in the filter. */
  get loaded(): boolean {
    return this.loadedAt !== undefined
  }

  get bytes(): number {
    return this.filter.bytes
  }

  get count(): number {
    return this.filter.count
  }

  /** A key created (or any key the invalidation log or a message names): known from now on. */
  add(hash: string): void {
    this.filter.add(hash)
    this.early?.push(hash)
  }

  verdict(hash: string): IssuedVerdict {
    if (this.filter.has(hash)) return 'issued'
    return this.loadedAt !== undefined && this.deps.current() ? 'never-issued' : 'unsure'
  }

  /** Loads once (retrying every second in the background when it fails); resolves after the first attempt. */
  start(): Promise<void> {
    this.loading = this.attempt()
    return this.loading
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.loading
  }

  private async attempt(): Promise<void> {
    if (this.stopped) return
    try {
      if (!this.deps.following()) throw new Error('the invalidation log has not been read yet')
      this.report = await this.load()
      this.deps.log.info(this.report, 'issued-key filter loaded')
    } catch (error) {
      this.deps.log.warn({ err: error }, 'issued-key filter not loaded yet; keys outside it are looked up until it is')
      this.timer = setTimeout(() => (this.loading = this.attempt()), RETRY_MS)
      this.timer.unref()
    }
  }

  /**
   * Reads every hash of api_keys, then of deleted_api_keys (a key deleted
   * meanwhile leaves the first for the second, so it is read in one of them),
   * into the live filter, which the log keeps adding to meanwhile.
   */
  private async load(): Promise<LoadReport> {
    const started = performance.now()
    const { rows } = await withDeadline(
      this.deps.pool.query<{ n: string }>(`SELECT (SELECT count(*) FROM api_keys) + (SELECT count(*) FROM deleted_api_keys) AS n`),
      STATEMENT_TIMEOUT_MS,
      'counting issued keys',
    )
    const expected = Number(rows[0]?.n ?? 0)
    if (this.early !== undefined) {
      // Room for a quarter more keys before the filter needs a second layer.
      const sized = new DigestFilter(expected * 1.25)
      for (const hash of this.early) sized.add(hash)
      this.filter = sized
      this.early = undefined
    }
    const filter = this.filter
    let keys = 0
    for (const table of ['api_keys', 'deleted_api_keys'] as const) keys += await this.loadTable(filter, table)
    this.loadedAt = performance.now()
    return { keys, ms: Math.round(this.loadedAt - started) }
  }

  private async loadTable(filter: DigestFilter, table: 'api_keys' | 'deleted_api_keys'): Promise<number> {
    let after = ''
    let keys = 0
    for (;;) {
      const { rows } = await withDeadline(
        this.deps.pool.query<{ key_hash: string }>(`SELECT key_hash FROM ${table} WHERE key_hash > $1 ORDER BY key_hash LIMIT ${PAGE}`, [after]),
        STATEMENT_TIMEOUT_MS,
        `reading ${table}`,
      )
      for (const row of rows) filter.add(row.key_hash)
      keys += rows.length
      if (rows.length < PAGE) return keys
      after = rows[rows.length - 1]!.key_hash
    }
  }
}
