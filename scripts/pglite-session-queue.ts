/**
 * The embedded Postgres's wire server, with a queue that keeps connections
 * apart. PGlite is one backend session shared by every connection, and
 * pglite-socket's own queue takes one protocol message at a time from
 * whichever connection sent it: one connection's Parse, Bind and Execute
 * could interleave with another's (an unnamed statement replaced under it,
 * an error that makes the session skip the other's messages until a Sync),
 * and outside a transaction block any connection could slip its statements
 * into another's.
 *
 * Here a connection holds the session from its first message until the
 * session is ready for a new exchange and idle: the backend's ReadyForQuery
 * with status `I`, after a Sync, a simple Query, the end of a COPY or the
 * start-up. Inside a transaction (status `T`, or `E` after an error) it keeps
 * the session until COMMIT or ROLLBACK, so no other connection's query runs
 * inside it or waits on it half done. A connection that goes away while it
 * holds the session has its transaction rolled back.
 */
import { createServer } from 'node:net'
import type { Server, Socket } from 'node:net'
import type { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketHandler } from '@electric-sql/pglite-socket'

/** Frontend messages after which the backend answers ReadyForQuery (Sync, Query, CopyDone, CopyFail). */
const READY_AFTER = new Set(['S', 'Q', 'c', 'f'].map((letter) => letter.charCodeAt(0)))
const READY_FOR_QUERY = 'Z'.charCodeAt(0)
const IDLE = 'I'.charCodeAt(0)

interface Waiting {
  handlerId: number
  message: Uint8Array
  onData: (data: Uint8Array) => void
  resolve: (bytes: number) => void
  reject: (error: unknown) => void
}

/** A start-up message has no type byte: its first four bytes are its length, so the first byte is 0. */
function awaitsReadyForQuery(message: Uint8Array): boolean {
  return message[0] === 0 || READY_AFTER.has(message[0]!)
}

/** Whether `tail`, the last bytes the backend sent, is a ReadyForQuery with status idle ('Z', length 5, 'I'). */
function endsIdle(tail: Uint8Array): boolean {
  return tail.length === 6 && tail[0] === READY_FOR_QUERY && tail[1] === 0 && tail[2] === 0 && tail[3] === 0 && tail[4] === 5 && tail[5] === IDLE
}

/** The last six bytes of what went out, across chunks. */
function keepTail(tail: Uint8Array, data: Uint8Array): Uint8Array {
  if (data.length >= 6) return data.slice(data.length - 6)
  const joined = new Uint8Array(tail.length + data.length)
  joined.set(tail)
  joined.set(data, tail.length)
  return joined.slice(Math.max(0, joined.length - 6))
}

/** What pglite-socket's handler asks of its queue (its QueryQueueManager), one exchange per connection at a time. */
export class SessionQueue {
  private waiting: Waiting[] = []
  /** The connection that holds the session: in the middle of an exchange, or inside a transaction. */
  private holder: number | null = null
  private running = false

  constructor(private readonly db: PGlite) {}

  enqueue(handlerId: number, message: Uint8Array, onData: (data: Uint8Array) => void): Promise<number> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ handlerId, message, onData, resolve, reject })
      void this.drain()
    })
  }

  /** The connection went away: what it still had queued is dropped. */
  clearQueueForHandler(handlerId: number): void {
    const dropped = this.waiting.filter((item) => item.handlerId === handlerId)
    this.waiting = this.waiting.filter((item) => item.handlerId !== handlerId)
    for (const item of dropped) item.reject(new Error('the connection closed'))
  }

  /** The connection went away: if it held the session, its transaction (if any) is rolled back and the others go on. */
  async clearTransactionIfNeeded(handlerId: number): Promise<void> {
    if (this.holder !== handlerId) return
    if (this.db.isInTransaction()) await this.db.exec('ROLLBACK')
    this.holder = null
    void this.drain()
  }

  /** Queued messages (for a look at a stuck queue). */
  get length(): number {
    return this.waiting.length
  }

  private next(): Waiting | undefined {
    if (this.holder === null) return this.waiting.shift()
    const index = this.waiting.findIndex((item) => item.handlerId === this.holder)
    return index === -1 ? undefined : this.waiting.splice(index, 1)[0]
  }

  private async drain(): Promise<void> {
    if (this.running) return
    this.running = true
    try {
      for (let item = this.next(); item !== undefined; item = this.next()) await this.run(item)
    } finally {
      this.running = false
    }
  }

  private async run(item: Waiting): Promise<void> {
    this.holder = item.handlerId
    let bytes = 0
    let tail: Uint8Array = new Uint8Array(0)
    try {
      await this.db.runExclusive(() =>
        this.db.execProtocolRawStream(item.message, {
          onRawData: (data) => {
            bytes += data.length
            tail = keepTail(tail, data)
            item.onData(data)
          },
        }),
      )
      item.resolve(bytes)
    } catch (error) {
      item.reject(error)
    }
    if (awaitsReadyForQuery(item.message) && endsIdle(tail)) this.holder = null
  }
}

type HandlerQueue = ConstructorParameters<typeof PGLiteSocketHandler>[0]['queryQueue']

export interface SessionServer {
  stop(): Promise<void>
}

/**
 * Serves `db` on the Postgres wire protocol at host:port, each connection
 * through pglite-socket's handler and the one SessionQueue; at most
 * `maxConnections` at once.
 */
export async function serveSessions(db: PGlite, host: string, port: number, maxConnections: number): Promise<SessionServer> {
  await db.waitReady
  const queue = new SessionQueue(db)
  const handlers = new Set<PGLiteSocketHandler>()
  const accept = (socket: Socket): void => {
    if (handlers.size >= maxConnections) {
      socket.end('Too many connections\n')
      return
    }
    // The handler's type names pglite-socket's own queue class, whose private fields no other class can match.
    const handler = new PGLiteSocketHandler({ queryQueue: queue as unknown as HandlerQueue, closeOnDetach: true })
    handlers.add(handler)
    const forget = (): boolean => handlers.delete(handler)
    handler.addEventListener('close', forget)
    handler.addEventListener('error', forget)
    handler.attach(socket).catch(() => {
      forget()
      socket.destroy()
    })
  }
  const server = createServer(accept)
  await listen(server, host, port)
  return {
    async stop() {
      await Promise.all([...handlers].map((handler) => handler.detach(true)))
      handlers.clear()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
}
