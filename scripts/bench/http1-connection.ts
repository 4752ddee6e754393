/**
 * The load generators' HTTP/1.1 client: one keep-alive connection (TLS for
 * https:, the benchmark's self-signed certificate accepted), one request at a
 * time, each written as one prepared string; answers are framed by
 * Content-Length or chunked encoding, counted by status, and their bodies
 * discarded unread.
 *
 * Why not undici, as everywhere else: a general client's work per request
 * (a request object, header validation, a parser, a body stream) cost the
 * generator as much CPU per request as the proxies it measured on a two-core
 * machine. Generator, upstream and target then shared both cores, and every
 * throughput ratio was pressed towards 1: the machine, not the target, set
 * the pace. This client costs a fraction of that, so the target is what
 * saturates (docs/benchmark.md has the figures). It reads only what a benchmark target sends; an
 * answer it cannot frame is counted as an error and its connection closed.
 */
import { connect as connectTcp } from 'node:net'
import type { Socket } from 'node:net'
import { connect as connectTls } from 'node:tls'

const HEAD_END = Buffer.from('\r\n\r\n')
const CRLF = Buffer.from('\r\n')
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*([0-9]+)[ \t]*(?=\r\n)/i
const CHUNKED = /\r\ntransfer-encoding:[^\r]*chunked/i
const CONNECTION_CLOSE = /\r\nconnection:[^\r]*close/i

/** The request line and headers of a GET, as the client writes them. */
export function requestHead(url: URL, headers: Record<string, string>): string {
  let head = `GET ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n`
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`
  return `${head}\r\n`
}

/**
 * Where a response is in its framing: looking for the end of its head or of a
 * chunk-size line (or trailer line), or skipping `left` bytes of body or chunk
 * data (a chunk's with its CRLF), after which comes the next chunk size or the end.
 */
type Framing = { kind: 'head' | 'chunk-size' | 'trailers' } | { kind: 'skip'; left: number; then: 'chunk-size' | 'end' }

export class Http1Connection {
  private socket: Socket | undefined
  private pending: ((status: string) => void) | undefined
  private status = ''
  private closeAfter = false
  private framing: Framing = { kind: 'head' }
  /** Bytes of a head or line not yet complete (body bytes are counted, never kept). */
  private partial: Buffer | undefined

  constructor(private readonly url: URL) {}

  /** Sends one request (a requestHead) and settles with the answer's status, or `error` with no answer. */
  request(head: string): Promise<string> {
    if (this.pending !== undefined) throw new Error('one request at a time on a connection')
    return new Promise((resolve) => {
      this.pending = resolve
      this.framing = { kind: 'head' }
      this.partial = undefined
      this.open().write(head, 'latin1')
    })
  }

  close(): void {
    this.socket?.destroy()
    this.socket = undefined
  }

  private open(): Socket {
    if (this.socket !== undefined && !this.socket.destroyed) return this.socket
    const port = Number(this.url.port || (this.url.protocol === 'https:' ? 443 : 80))
    const socket =
      this.url.protocol === 'https:' ? connectTls({ host: this.url.hostname, port, rejectUnauthorized: false }) : connectTcp({ host: this.url.hostname, port })
    socket.setNoDelay(true)
    socket.on('data', (chunk: Buffer) => this.receive(chunk))
    socket.on('error', () => undefined)
    // A connection closed by the target (close() forgets its socket first, so its own closes do not count here).
    socket.on('close', () => {
      if (this.socket !== socket) return
      this.socket = undefined
      this.settle('error')
    })
    this.socket = socket
    return socket
  }

  private settle(outcome: string): void {
    const pending = this.pending
    this.pending = undefined
    this.partial = undefined
    pending?.(outcome)
  }

  /** Frames what has arrived; settles the request once its answer is complete. */
  private receive(chunk: Buffer): void {
    if (this.pending === undefined) {
      // Nothing was asked: the target spoke out of turn.
      this.close()
      return
    }
    const data = this.partial === undefined ? chunk : Buffer.concat([this.partial, chunk])
    this.partial = undefined
    let at = 0
    for (;;) {
      const framing = this.framing
      if (framing.kind === 'skip') {
        if (data.length - at < framing.left) {
          framing.left -= data.length - at
          return
        }
        at += framing.left
        if (framing.then === 'end') return this.complete(data, at)
        this.framing = { kind: 'chunk-size' }
        continue
      }
      const end = data.indexOf(framing.kind === 'head' ? HEAD_END : CRLF, at)
      if (end === -1) {
        this.partial = data.subarray(at)
        return
      }
      if (framing.kind === 'head') {
        const head = data.toString('latin1', at, end + 2)
        const status = head.slice(9, 12)
        at = end + 4
        if (status.startsWith('1')) continue // an interim answer; the final one follows
        this.status = status
        this.closeAfter = CONNECTION_CLOSE.test(head)
        const length = CONTENT_LENGTH.exec(head)
        if (CHUNKED.test(head)) this.framing = { kind: 'chunk-size' }
        else if (length !== null) this.framing = { kind: 'skip', left: Number(length[1]), then: 'end' }
        else if (status === '204' || status === '304') this.framing = { kind: 'skip', left: 0, then: 'end' }
        else return this.fail()
        continue
      }
      const line = data.toString('latin1', at, end)
      at = end + 2
      if (framing.kind === 'trailers') {
        if (line === '') return this.complete(data, at)
        continue
      }
      const size = Number.parseInt(line, 16)
      if (!Number.isFinite(size) || size < 0) return this.fail()
      // A chunk's data is followed by CRLF; the last chunk (size 0) by trailers and a blank line.
      this.framing = size === 0 ? { kind: 'trailers' } : { kind: 'skip', left: size + 2, then: 'chunk-size' }
    }
  }

  private complete(data: Buffer, at: number): void {
    if (at !== data.length || this.closeAfter) this.close() // bytes past the answer, or the target is closing: start afresh
    this.settle(this.status)
  }

  private fail(): void {
    this.close()
    this.settle('error')
  }
}
