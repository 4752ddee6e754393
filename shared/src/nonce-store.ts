/**
 * Where a backend remembers the nonces of the signed requests it accepted,
 * so that a captured request is accepted once, by one replica:
 *
 * - without REDIS_URL, in the process (NonceMemory): enough for one replica
 *   of each backend (`npm start`), and only then;
 * - with REDIS_URL, in Redis as well, where every replica of the backend sees
 *   them: `SET <prefix>nonce:<audience>:<nonce> 1 NX PX <two windows>`, after
 *   the in-process memory as the first, free check. When Redis cannot answer
 *   within the client's command deadline (down, slow, refusing writes), the
 *   nonce is `unavailable` and the request is refused (503): accepting it
 *   could accept a replay.
 *
 * A request signed at `t` is acceptable from `t - window` to `t + window`, so
 * a nonce is kept for two windows after it was accepted. That is the only
 * command a backend sends (besides a connection's own); its Redis user needs
 * SET on its own nonce keys and nothing else (docs/operations.md).
 */
import type { Redis } from 'ioredis'
import { connectRedis, createRedis } from './redis.js'

/** `new`: remembered now; `replayed`: seen before; `unavailable`: cannot be known now. */
export type NonceCheck = 'new' | 'replayed' | 'unavailable'

export interface NonceStore {
  /** Remembers the nonce when it is new, and says whether it was. */
  remember(nonce: string, nowSeconds: number): NonceCheck | Promise<NonceCheck>
}

/**
 * The nonces accepted within the replay window, in two generations of Sets:
 * each check is O(1) and memory holds at most two periods of requests. A
 * nonce must be remembered for two windows after it was first accepted; a
 * nonce stays at least one whole period (it is dropped only when its
 * generation is rotated out the second time), so the period is two windows.
 */
export class NonceMemory {
  private current = new Set<string>()
  private previous = new Set<string>()
  private startedAt: number | undefined

  constructor(private readonly periodSeconds: number) {}

  /** True when the nonce is new (it is now remembered); false when it was seen within the period. */
  remember(nonce: string, nowSeconds: number): boolean {
    this.rotate(nowSeconds)
    if (this.current.has(nonce) || this.previous.has(nonce)) return false
    this.current.add(nonce)
    return true
  }

  /** How many nonces are held (for tests of the bound). */
  get size(): number {
    return this.current.size + this.previous.size
  }

  private rotate(nowSeconds: number): void {
    if (this.startedAt === undefined) {
      this.startedAt = nowSeconds
      return
    }
    const elapsed = nowSeconds - this.startedAt
    // A clock that went back (tests move it) rotates nothing: forgetting early would let a replay through.
    if (elapsed < this.periodSeconds) return
    this.previous = elapsed >= 2 * this.periodSeconds ? new Set() : this.current
    this.current = new Set()
    this.startedAt = nowSeconds
  }
}

/** One process's memory only. */
export class ProcessNonceStore implements NonceStore {
  private readonly memory: NonceMemory

  constructor(windowSeconds: number) {
    this.memory = new NonceMemory(2 * windowSeconds)
  }

  remember(nonce: string, nowSeconds: number): NonceCheck {
    return this.memory.remember(nonce, nowSeconds) ? 'new' : 'replayed'
  }
}

/** A backend's Redis for its nonces: a client that fails fast (createRedis) and REDIS_KEY_PREFIX. */
export interface NonceRedis {
  client: Redis
  prefix: string
}

/**
 * The nonce client of a backend process (`<service>-nonces`), connecting in
 * the background: until it is connected, and whenever it is not, signed
 * requests are refused at once (the client fails fast, and waits at most its
 * 2 s command deadline for an answer).
 */
export function createNonceRedis(url: string, prefix: string, service: string): NonceRedis {
  const client = createRedis(url, `${service}-nonces`)
  connectRedis(client).catch(() => undefined)
  return { client, prefix }
}

/** The Redis key of a nonce accepted by `audience`: one pattern per backend, `<prefix>nonce:<audience>:*`. */
export function nonceKey(prefix: string, audience: string, nonce: string): string {
  return `${prefix}nonce:${audience}:${nonce}`
}

/** This process's memory first, then Redis, shared by every replica of the backend. */
export class SharedNonceStore implements NonceStore {
  private readonly memory: NonceMemory
  private readonly ttlMs: number

  constructor(
    private readonly redis: NonceRedis,
    private readonly audience: string,
    windowSeconds: number,
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {
    this.memory = new NonceMemory(2 * windowSeconds)
    this.ttlMs = 2 * windowSeconds * 1000
  }

  async remember(nonce: string, nowSeconds: number): Promise<NonceCheck> {
    if (!this.memory.remember(nonce, nowSeconds)) return 'replayed'
    try {
      const set = await this.redis.client.set(nonceKey(this.redis.prefix, this.audience, nonce), '1', 'PX', this.ttlMs, 'NX')
      return set === 'OK' ? 'new' : 'replayed'
    } catch (error) {
      this.onError(error)
      return 'unavailable'
    }
  }
}
