/**
 * Each key's last-used time (spec §2) and the client address of that use,
 * without a Postgres write per request:
 * uses are coalesced per key id in memory and written in one statement every
 * `intervalMs` (and at shutdown). A failed write keeps the times for the next
 * flush; recordLastUse keeps the newest time when replicas flush out of order.
 */
import type { Pool } from '@scoped/shared/db'
import { recordLastUse } from '@scoped/shared/key-store'
import type { LastUse } from '@scoped/shared/key-store'
import type { Logger } from '@scoped/shared/logger'

export const LAST_USE_FLUSH_INTERVAL_MS = 2_000

export class LastUseRecorder {
  /** key id → epoch milliseconds of its latest use */
  private pending = new Map<string, number>()
  /** key id → the client address of its latest use */
  private addresses = new Map<string, string>()
  private timer: NodeJS.Timeout | undefined
  private flushing: Promise<void> = Promise.resolve()
  /** Told of each write to Postgres (for the round-trip metric). */
  onWrite: () => void = () => undefined

  constructor(
    private readonly pool: Pool,
    private readonly log: Logger,
    private readonly intervalMs = LAST_USE_FLUSH_INTERVAL_MS,
  ) {}

  record(keyId: string, nowMs: number, clientAddress?: string): void {
    this.pending.set(keyId, nowMs)
    if (clientAddress !== undefined) this.addresses.set(keyId, clientAddress)
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
    const addresses = this.addresses
    this.pending = new Map()
    this.addresses = new Map()
    const uses = new Map<string, LastUse>()
    for (const [keyId, ms] of batch) uses.set(keyId, { at: new Date(ms), ip: addresses.get(keyId) ?? null })
    this.onWrite()
    try {
      await recordLastUse(this.pool, uses)
    } catch (error) {
      this.log.warn({ err: error, keys: batch.size }, 'could not record last use; will retry')
      for (const [keyId, ms] of batch) {
        const newer = this.pending.get(keyId)
        if (newer === undefined || newer < ms) {
          this.pending.set(keyId, ms)
          const address = addresses.get(keyId)
          if (address !== undefined) this.addresses.set(keyId, address)
        }
      }
    }
  }
}
