/**
 * A client that sends a known number of requests per key through several
 * gateway replicas, as a client behind a load balancer would, and tallies
 * what it received: the answers the gateway attributes to the key (its usage
 * counts them), the answers it does not (503 `Authentication is temporarily
 * unavailable`: the key could not be verified; 503 `Service temporarily
 * unavailable`: the replica is draining), and requests that got no answer at
 * all (a connection refused or closed before an answer came).
 *
 * A key is sent until the client has received its number of attributed
 * answers; whatever did not end in one is sent again. A refused connection or
 * a draining answer takes the replica out of the rotation (the load balancer's
 * part); a key that cannot be verified is tried again after a short pause.
 * Anything else (a status no request of the load should get) is attributed to
 * the key (the gateway answered for it) and listed in `unexpected`.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { Agent } from 'undici'
import { errorCatalog } from '@scoped/shared/errors'
import type { Teardown } from './teardown.js'

export interface LoadKey {
  /** The key's id, how usage names it. */
  id: string
  /** The key itself, sent as a bearer token. */
  key: string
  /** What it asks for (a GET its scope may make). */
  path: string
  /** How many attributed answers it gets in all. */
  answers: number
}

export interface KeyTally {
  /** Answers the gateway attributes to the key: what its usage must count. */
  attributed: number
  /** 503 answers the gateway does not attribute to a key (it could not verify it, or it was draining). */
  notAttributed: number
  /** Requests that got no answer (the connection refused or closed first). */
  unanswered: number
}

export interface ReplicaTarget {
  name: string
  port: number
}

/** Pause after an answer that says the key could not be verified, as a client backs off a 503. */
const BACKOFF_MS = 25
const NOT_ATTRIBUTED = new Set<string>([errorCatalog.authUnavailable.message, errorCatalog.serviceUnavailable.message])

interface Replica {
  target: ReplicaTarget
  agent: Agent
  /** Still in the rotation. */
  live: boolean
  attributed: number
  notAttributed: number
}

export class CountedLoad {
  readonly tallies = new Map<string, KeyTally>()
  readonly unexpected: string[] = []
  /** performance.now() of the last attributed answer received. */
  lastAnswerAt = 0
  private readonly replicas: Replica[]
  private readonly inFlight = new Map<string, number>()
  private share = 0
  private turn = 0
  private keyTurn = 0
  private stopped = false
  private readonly workers: Promise<void>[] = []
  private wake: (() => void) | undefined

  constructor(
    t: Teardown,
    private readonly keys: readonly LoadKey[],
    targets: readonly ReplicaTarget[],
    ca: string,
    private readonly concurrency = 8,
  ) {
    this.replicas = targets.map((target) => ({
      target,
      agent: new Agent({ connect: { ca, servername: 'localhost' } }),
      live: true,
      attributed: 0,
      notAttributed: 0,
    }))
    for (const key of keys) {
      this.tallies.set(key.id, { attributed: 0, notAttributed: 0, unanswered: 0 })
      this.inFlight.set(key.id, 0)
    }
    t.teardown(async () => {
      this.stopped = true
      this.wake?.()
      await Promise.all(this.workers)
      await Promise.all(this.replicas.map((replica) => replica.agent.close()))
    })
  }

  /** Lets the load go on until each key has this share (0–1) of its answers. */
  release(share: number): void {
    if (this.workers.length === 0) for (let i = 0; i < this.concurrency; i++) this.workers.push(this.work())
    this.share = share
    this.wake?.()
  }

  /** Whether every key has its share of answers so far. */
  reached(share: number): boolean {
    return this.keys.every((key) => this.tallies.get(key.id)!.attributed >= this.allowed(key, share))
  }

  /** Attributed and not attributed answers of one replica. */
  answersOf(name: string): { attributed: number; notAttributed: number } {
    const replica = this.replicas.find((candidate) => candidate.target.name === name)!
    return { attributed: replica.attributed, notAttributed: replica.notAttributed }
  }

  /** Whether a replica is still in the rotation. */
  isLive(name: string): boolean {
    return this.replicas.find((candidate) => candidate.target.name === name)!.live
  }

  private allowed(key: LoadKey, share: number): number {
    return Math.ceil(key.answers * share)
  }

  /** The next key, in turn, that may take one more request now: its attributed answers and those in flight stay within its share. */
  private nextKey(): LoadKey | undefined {
    for (let i = 0; i < this.keys.length; i++) {
      const key = this.keys[this.keyTurn++ % this.keys.length]!
      if (this.tallies.get(key.id)!.attributed + this.inFlight.get(key.id)! < this.allowed(key, this.share)) return key
    }
    return undefined
  }

  private nextReplica(): Replica | undefined {
    const live = this.replicas.filter((replica) => replica.live)
    if (live.length === 0) return undefined
    return live[this.turn++ % live.length]
  }

  private async work(): Promise<void> {
    while (!this.stopped) {
      const key = this.nextKey()
      const replica = this.nextReplica()
      if (key === undefined || replica === undefined) {
        // Nothing to send until the share is raised (or a request in flight ends without an answer).
        await Promise.race([new Promise<void>((resolve) => (this.wake = resolve)), sleep(50)])
        continue
      }
      this.inFlight.set(key.id, this.inFlight.get(key.id)! + 1)
      try {
        await this.send(key, replica)
      } finally {
        this.inFlight.set(key.id, this.inFlight.get(key.id)! - 1)
      }
    }
  }

  private async send(key: LoadKey, replica: Replica): Promise<void> {
    const tally = this.tallies.get(key.id)!
    let status: number
    let text: string
    try {
      const response = await replica.agent.request({
        origin: `https://127.0.0.1:${replica.target.port}`,
        path: key.path,
        method: 'GET',
        headers: { authorization: `Bearer ${key.key}` },
      })
      status = response.statusCode
      text = await response.body.text()
    } catch (error) {
      // No answer: nothing the gateway sent, so nothing it may count. A refused connection means the replica is gone.
      tally.unanswered++
      if ((error as { code?: string }).code === 'ECONNREFUSED') replica.live = false
      return
    }
    const message = messageOf(text)
    if (status === 503 && message !== undefined && NOT_ATTRIBUTED.has(message)) {
      tally.notAttributed++
      replica.notAttributed++
      if (message === errorCatalog.serviceUnavailable.message) replica.live = false
      else await sleep(BACKOFF_MS)
      return
    }
    tally.attributed++
    replica.attributed++
    this.lastAnswerAt = performance.now()
    if (status !== 200) this.unexpected.push(`${replica.target.name} ${key.path}: ${status} ${text.slice(0, 200)}`)
  }
}

function messageOf(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { message?: unknown }
    return typeof body.message === 'string' ? body.message : undefined
  } catch {
    return undefined
  }
}
