/**
 * Each key's last-used time (spec §2), without a Postgres write per request:
 * uses are coalesced per key id in memory and written in one statement every
 * `intervalMs` (and at shutdown). A failed write keeps the times for the next
 * flush; recordLastUse keeps the newest time when replicas flush out of order.
 */
import type { Pool } from '@scoped/shared/db'
import { recordLastUse } from '@scoped/shared/key-lookup'
import type { Logger } from '@scoped/shared/logger'

export const LAST_USE_FLUSH_INTERVAL_MS = 2_000

export class LastUseRecorder {
  /** key id → epoch milliseconds of its latest use */
  private pending = new Map<string, number>()
  private timer: NodeJS.Timeout | undefined
  private flushing: Promise<void> = Promise.resolve()

  constructor(
    private readonly pool: Pool,
    private readonly log: Logger,
    private readonly intervalMs = LAST_USE_FLUSH_INTERVAL_MS,
  ) {}

  record(keyId: string, nowMs: number): void {
    this.pending.set(keyId, nowMs)
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.intervalMs)
    this.timer.unref()
  }

  /** Writes what is pending; flushes never overlap. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.write())
    return this.flushing
  }

  /** Stops the timer and writes what is left. */
  async stop(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
  }

  private async write(): Promise<void> {
    if (this.pending.size === 0) return
    const batch = this.pending
    this.pending = new Map()
    const uses = new Map<string, Date>()
    for (const [keyId, ms] of batch) uses.set(keyId, new Date(ms))
    try {
      await recordLastUse(this.pool, uses)
    } catch (error) {
      this.log.warn({ err: error, keys: batch.size }, 'could not record last use; will retry')
      for (const [keyId, ms] of batch) {
        const newer = this.pending.get(keyId)
        if (newer === undefined || newer < ms) this.pending.set(keyId, ms)
      }
    }
  }
}
