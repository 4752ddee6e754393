/**
 * One request through the gateway's upstream connections (upstream.ts), as
 * the relay sends one: a place taken with `acquire` for a tenant, the request
 * given to the share's `dispatch` with a handler of undici's interface, and
 * the place released when the answer has ended or failed. Resolves with the
 * status and the body as text; rejects with the transport error, or with
 * `upstream-busy` / `upstream-share` when no place was given.
 */
import type { Client, Dispatcher } from 'undici'
import type { UpstreamExchange, Upstreams } from '@scoped/gateway/upstream'

export interface UpstreamAnswer {
  status: number
  body: string
}

class Collector implements UpstreamExchange {
  connection: Client | null = null
  private status = 0
  private readonly chunks: Buffer[] = []

  constructor(
    private readonly done: (error: Error | null, answer?: UpstreamAnswer) => void,
    private readonly release: () => void,
  ) {}

  onRequestStart(): void {}

  onResponseStart(_controller: unknown, statusCode: number): void {
    this.status = statusCode
  }

  onResponseData(_controller: unknown, chunk: Buffer): void {
    this.chunks.push(chunk)
  }

  onResponseEnd(): void {
    this.release()
    this.done(null, { status: this.status, body: Buffer.concat(this.chunks).toString() })
  }

  onResponseError(_controller: unknown, error: Error): void {
    this.release()
    this.done(error)
  }
}

/**
 * GET `path` from `origin` as `tenant` (by default a tenant of its own, the
 * path, so that only the backend's own bounds apply); rejects at once when
 * there is no place for it.
 */
export function upstreamRequest(upstreams: Upstreams, origin: string, path: string, tenant: string = path): Promise<UpstreamAnswer> {
  return new Promise((resolve, reject) => {
    const backend = upstreams.acquire(origin, tenant)
    if (typeof backend === 'string') {
      reject(new Error(backend))
      return
    }
    const collector: Collector = new Collector(
      (error, answer) => (error === null ? resolve(answer!) : reject(error)),
      () => upstreams.release(backend, collector),
    )
    const options: Dispatcher.DispatchOptions = { method: 'GET', path, headers: {} }
    backend.dispatch(options, collector)
  })
}
