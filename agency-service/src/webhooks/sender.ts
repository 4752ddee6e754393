/**
 * The webhook sender, run by every agency-service replica: every `pollMs` it
 * claims the messages due (outbox.ts), signs and posts each (signing.ts,
 * outbound.ts), and records the attempt; every `remindersEveryMs` it writes
 * the expiry reminders due. Stopping stops claiming and waits for the
 * deliveries in flight to be recorded, so a SIGTERM mid-delivery neither
 * loses nor repeats one (a replica killed outright leaves a lease that runs
 * out, and the message is sent again with the same webhook-id).
 */
import type { Logger } from 'pino'
import type { Pool } from '@scoped/shared/db'
import type { Agent } from 'undici'
import { claimDueMessages, recordAttempt, sendKeyReminders } from './outbox.js'
import type { ClaimedMessage } from './outbox.js'
import { createOutboundAgent, DELIVERY_DEADLINE_MS, postWebhook } from './outbound.js'
import type { OutboundOptions } from './outbound.js'
import { CONTRACT_RETRY_SCHEDULE, retryDelayMs } from './retry-schedule.js'
import type { RetrySchedule } from './retry-schedule.js'
import { signedHeaders } from './signing.js'

export interface SenderOptions extends OutboundOptions {
  pool: Pool
  logger: Logger
  retrySchedule?: RetrySchedule
  pollMs?: number
  remindersEveryMs?: number
  /** How many deliveries this replica runs at once (each to a different endpoint). */
  concurrency?: number
  deadlineMs?: number
  /** The clock of signatures and reminders; tests move it. */
  now?: () => Date
}

export class WebhookSender {
  private readonly agent: Agent
  private readonly inFlight = new Set<Promise<void>>()
  private readonly timers: NodeJS.Timeout[] = []
  private stopped = false
  private polling = false

  constructor(private readonly options: SenderOptions) {
    this.agent = createOutboundAgent(options)
  }

  private get now(): Date {
    return (this.options.now ?? (() => new Date()))()
  }

  start(): void {
    this.timers.push(setInterval(() => void this.poll(), this.options.pollMs ?? 1000))
    this.timers.push(setInterval(() => void this.remind(), this.options.remindersEveryMs ?? 60_000))
    void this.poll()
    void this.remind()
  }

  /** One round: claims what is due and this replica has room for, and starts delivering it. */
  async poll(): Promise<void> {
    if (this.stopped || this.polling) return
    this.polling = true
    try {
      const room = (this.options.concurrency ?? 4) - this.inFlight.size
      if (room <= 0) return
      const deadlineMs = this.options.deadlineMs ?? DELIVERY_DEADLINE_MS
      // The lease outlasts the deadline, so it runs out only when this replica is gone.
      const claimed = await claimDueMessages(this.options.pool, room, deadlineMs * 3)
      for (const message of claimed) this.track(this.deliver(message, deadlineMs))
    } catch (error) {
      this.options.logger.error({ err: error }, 'webhook sender: claiming failed')
    } finally {
      this.polling = false
    }
  }

  private track(delivery: Promise<void>): void {
    this.inFlight.add(delivery)
    void delivery.finally(() => {
      this.inFlight.delete(delivery)
      // A delivered head makes its endpoint's next message due at once.
      if (!this.stopped) void this.poll()
    })
  }

  private async deliver(message: ClaimedMessage, deadlineMs: number): Promise<void> {
    try {
      const headers = signedHeaders(message.secret, message.messageId, this.now, message.payload)
      const outcome = await postWebhook(this.agent, message.url, headers, message.payload, deadlineMs)
      const delivered = outcome.error === null
      const retryInMs = retryDelayMs(message.attempts, this.options.retrySchedule ?? CONTRACT_RETRY_SCHEDULE)
      await recordAttempt(this.options.pool, message, { delivered, ...outcome, retryInMs })
      this.options.logger.info(
        { webhookMessage: message.messageId, endpoint: message.endpointId, attempt: message.attempts, status: outcome.status, error: outcome.error },
        delivered ? 'webhook delivered' : 'webhook attempt failed',
      )
    } catch (error) {
      this.options.logger.error({ err: error, webhookMessage: message.messageId }, 'webhook sender: recording an attempt failed')
    }
  }

  private async remind(): Promise<void> {
    if (this.stopped) return
    try {
      await sendKeyReminders(this.options.pool, this.now)
    } catch (error) {
      this.options.logger.error({ err: error }, 'webhook sender: expiry reminders failed')
    }
  }

  /** Stops claiming, waits for the deliveries in flight to be recorded, and closes the connections. */
  async stop(): Promise<void> {
    this.stopped = true
    for (const timer of this.timers) clearInterval(timer)
    while (this.polling || this.inFlight.size > 0) {
      await Promise.all([...this.inFlight, new Promise((resolve) => setTimeout(resolve, 10))])
    }
    await this.agent.close()
  }
}
