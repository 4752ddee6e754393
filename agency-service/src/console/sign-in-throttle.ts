/**
 * Throttling of failed console sign-ins, so that guessing is slow and a
 * stranger cannot lock anyone out.
 *
 * Subjects (an attempt counts against each of its own):
 * - a known device (device-cookie.ts: this browser signed in as this account
 *   before): the (user, device) pair alone, 10 failures per 15 minutes. It is
 *   never refused because of failures made elsewhere;
 * - otherwise the client address (an IPv6 client by its /64, which one host
 *   usually has whole), 20 failures per 15 minutes, which stops one client
 *   spraying many accounts, the (email, client address) pair, 5 per 15
 *   minutes, which stops one client guessing one account's password, and the
 *   client's network (an IPv6 /48, an IPv4 /24), 60 per 15 minutes, an
 *   aggregate allowance that stops one site from spreading its guesses over
 *   the many /64s (or addresses) it holds.
 * There is deliberately no limit per email alone: anyone could keep it
 * exhausted and lock the account's owner out. Guessing from many addresses
 * is slowed per address and held back by the password rules (length, the
 * common-password list, scrypt at OWASP's cost).
 *
 * Where the counts live: in memory first, a bounded map per process (the
 * least recently touched subject is dropped past `maxSubjects`), so a refused
 * attempt is decided without any database work. An attempt that memory lets
 * through reads the counts of its subjects in Postgres (one statement), which
 * is how agency-service replicas share them; a failure is written there (one
 * statement). In-flight attempts count in memory as failures until they are
 * decided, so one process never checks more than the limit of passwords per
 * subject, however many arrive at once; several replicas may each let their
 * in-flight attempts through before they see each other's failures.
 */
import { createHash } from 'node:crypto'
import type { Pool } from '@scoped/shared/db'
import { familyOf, normalizeAddress } from '@scoped/shared/ip-address'
import type { Device } from './device-cookie.js'

export const SIGN_IN_WINDOW_MS = 15 * 60_000
export const MAX_FAILURES_PER_CLIENT = 20
export const MAX_FAILURES_PER_EMAIL_AND_CLIENT = 5
export const MAX_FAILURES_PER_DEVICE = 10
/** Failures per network (an IPv6 /48, an IPv4 /24) in the window, all its clients together. */
export const MAX_FAILURES_PER_NETWORK = 60
/** Subjects remembered per process; past it the least recently touched is dropped (Postgres still has it). */
export const DEFAULT_MAX_SUBJECTS = 50_000
/** Old rows are deleted at most this often, by an attempt that reaches Postgres anyway. */
const PRUNE_EVERY_MS = 60_000

export type SubjectKind = 'client' | 'email-client' | 'network' | 'device'

export interface Subject {
  kind: SubjectKind
  /** SHA-256 of what it names, hex: what memory and console_sign_in_failures hold (never an email or address in clear). */
  hash: string
  limit: number
}

function digest(value: string): string {
  return createHash('sha256').update(value).digest('hex')
}

/** The eight groups of a normalized IPv6 address, `::` expanded. */
function ipv6Groups(normalized: string): string[] {
  const [head = '', tail] = normalized.split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  return tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
}

/** The part of a client address that names one client: an IPv4 address, or the /64 of an IPv6 one. */
export function clientKey(address: string): string {
  const normalized = normalizeAddress(address) ?? address
  if (familyOf(normalized) !== 'ipv6') return normalized
  return `${ipv6Groups(normalized).slice(0, 4).join(':')}::/64`
}

/** The network a client address belongs to, for the aggregate allowance: the /24 of an IPv4 address, the /48 of an IPv6 one. */
export function networkKey(address: string): string {
  const normalized = normalizeAddress(address) ?? address
  if (familyOf(normalized) === 'ipv6') return `${ipv6Groups(normalized).slice(0, 3).join(':')}::/48`
  const octets = normalized.split('.')
  return octets.length === 4 ? `${octets.slice(0, 3).join('.')}.0/24` : normalized
}

/** What one attempt counts against: its known device alone, or its client, (email, client) and network. */
export function signInSubjects(email: string, clientAddress: string, device: Device | undefined): Subject[] {
  if (device !== undefined) return [{ kind: 'device', hash: digest(`device:${device.userId}:${device.deviceId}`), limit: MAX_FAILURES_PER_DEVICE }]
  const client = clientKey(clientAddress)
  return [
    { kind: 'client', hash: digest(`client:${client}`), limit: MAX_FAILURES_PER_CLIENT },
    { kind: 'email-client', hash: digest(`email-client:${email}\n${client}`), limit: MAX_FAILURES_PER_EMAIL_AND_CLIENT },
    { kind: 'network', hash: digest(`network:${networkKey(clientAddress)}`), limit: MAX_FAILURES_PER_NETWORK },
  ]
}

interface Memory {
  /** Failure times (ms), oldest first, within the window; at most the subject's limit of them. */
  failures: number[]
  /** Attempts let through and not decided yet. */
  pending: number
}

export type SignInAttempt =
  { allowed: false; retryAfterSeconds: number; decidedBy: 'memory' | 'postgres' } | { allowed: true; subjects: Subject[]; at: Date; settled: boolean }

export interface SignInThrottleOptions {
  maxSubjects?: number
}

export class SignInThrottle {
  private readonly memory = new Map<string, Memory>()
  private readonly maxSubjects: number
  private lastPrune = -Infinity

  constructor(
    private readonly pool: Pool,
    options: SignInThrottleOptions = {},
  ) {
    this.maxSubjects = options.maxSubjects ?? DEFAULT_MAX_SUBJECTS
  }

  /** Subjects held in memory, for tests and metrics. */
  get size(): number {
    return this.memory.size
  }

  private entry(hash: string, nowMs: number): Memory {
    let entry = this.memory.get(hash)
    if (entry === undefined) {
      entry = { failures: [], pending: 0 }
    } else {
      // Touched: to the end of the map's order, the most recently used.
      this.memory.delete(hash)
      const cutoff = nowMs - SIGN_IN_WINDOW_MS
      while (entry.failures.length > 0 && entry.failures[0]! <= cutoff) entry.failures.shift()
    }
    this.memory.set(hash, entry)
    if (this.memory.size > this.maxSubjects) {
      // Oldest first; a subject with attempts in flight stays (dropping it would forget them).
      for (const [key, value] of this.memory) {
        if (this.memory.size <= this.maxSubjects) break
        if (value.pending === 0 && key !== hash) this.memory.delete(key)
      }
    }
    return entry
  }

  /** Seconds until every subject is under its limit again, or 0 when all are now. */
  private wait(subjects: readonly Subject[], nowMs: number): number {
    let until = 0
    for (const subject of subjects) {
      const entry = this.entry(subject.hash, nowMs)
      const used = entry.failures.length + entry.pending
      if (used < subject.limit) continue
      // The failure whose expiry brings the count under the limit; in-flight attempts count as just now.
      const index = used - subject.limit
      const freedAt = (index < entry.failures.length ? entry.failures[index]! : nowMs) + SIGN_IN_WINDOW_MS
      until = Math.max(until, freedAt)
    }
    return until === 0 ? 0 : Math.max(1, Math.ceil((until - nowMs) / 1000))
  }

  /**
   * Decides whether an attempt may check a password: refused from memory
   * alone (no database work), else after reading its subjects' shared counts
   * in Postgres. An allowed attempt must end with failed(), succeeded() or
   * abandoned().
   */
  async begin(subjects: Subject[], now: Date): Promise<SignInAttempt> {
    const nowMs = now.getTime()
    const fromMemory = this.wait(subjects, nowMs)
    if (fromMemory > 0) return { allowed: false, retryAfterSeconds: fromMemory, decidedBy: 'memory' }
    for (const subject of subjects) this.entry(subject.hash, nowMs).pending++
    const attempt: SignInAttempt = { allowed: true, subjects, at: now, settled: false }
    try {
      await this.prune(now)
      const since = new Date(nowMs - SIGN_IN_WINDOW_MS)
      const { rows } = await this.pool.query<{ subject: string; times: Date[] }>(
        `SELECT subject, (array_agg(failed_at ORDER BY failed_at DESC))[1:$3] AS times
           FROM console_sign_in_failures WHERE subject = ANY($1::text[]) AND failed_at > $2 GROUP BY subject`,
        [subjects.map((subject) => subject.hash), since, Math.max(...subjects.map((subject) => subject.limit))],
      )
      // What other replicas (or this one, earlier) recorded: memory takes the longer of the two lists.
      for (const row of rows) {
        const entry = this.entry(row.subject, nowMs)
        const shared = row.times.map((time) => time.getTime()).sort((a, b) => a - b)
        if (shared.length > entry.failures.length) entry.failures = shared
      }
    } catch (error) {
      this.abandoned(attempt)
      throw error
    }
    // This attempt's own pending mark is in the count: refused when anything beyond it reaches the limit.
    for (const subject of subjects) this.entry(subject.hash, nowMs).pending--
    const shared = this.wait(subjects, nowMs)
    if (shared > 0) {
      attempt.settled = true
      return { allowed: false, retryAfterSeconds: shared, decidedBy: 'postgres' }
    }
    for (const subject of subjects) this.entry(subject.hash, nowMs).pending++
    return attempt
  }

  private settle(attempt: Extract<SignInAttempt, { allowed: true }>): boolean {
    if (attempt.settled) return false
    attempt.settled = true
    const nowMs = attempt.at.getTime()
    for (const subject of attempt.subjects) {
      const entry = this.entry(subject.hash, nowMs)
      entry.pending = Math.max(0, entry.pending - 1)
    }
    return true
  }

  /** The password was wrong (or the email unknown): counted here and in Postgres. */
  async failed(attempt: Extract<SignInAttempt, { allowed: true }>): Promise<void> {
    if (!this.settle(attempt)) return
    const atMs = attempt.at.getTime()
    for (const subject of attempt.subjects) {
      const entry = this.entry(subject.hash, atMs)
      entry.failures.push(atMs)
      entry.failures.sort((a, b) => a - b)
      if (entry.failures.length > subject.limit) entry.failures.splice(0, entry.failures.length - subject.limit)
    }
    await this.pool.query(`INSERT INTO console_sign_in_failures (subject, failed_at) SELECT unnest($1::text[]), $2`, [
      attempt.subjects.map((subject) => subject.hash),
      attempt.at,
    ])
  }

  /**
   * The password was right: this attempt was no failure, and the failures
   * of its (email, client) or (user, device) subject are forgiven. The client
   * address and its network keep their counts (a valid account must not
   * reset a sprayer's).
   */
  async succeeded(attempt: Extract<SignInAttempt, { allowed: true }>): Promise<void> {
    if (!this.settle(attempt)) return
    const forgiven = attempt.subjects.filter((subject) => subject.kind === 'email-client' || subject.kind === 'device').map((subject) => subject.hash)
    for (const hash of forgiven) this.entry(hash, attempt.at.getTime()).failures = []
    if (forgiven.length > 0) await this.pool.query(`DELETE FROM console_sign_in_failures WHERE subject = ANY($1::text[])`, [forgiven])
  }

  /** The attempt ended without a verdict on the password (an error): it counts for nothing. */
  abandoned(attempt: Extract<SignInAttempt, { allowed: true }>): void {
    this.settle(attempt)
  }

  private async prune(now: Date): Promise<void> {
    if (now.getTime() - this.lastPrune < PRUNE_EVERY_MS) return
    this.lastPrune = now.getTime()
    await this.pool.query(`DELETE FROM console_sign_in_failures WHERE failed_at <= $1`, [new Date(now.getTime() - SIGN_IN_WINDOW_MS)])
  }
}
