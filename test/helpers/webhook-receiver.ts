/**
 * A webhook receiver: a real HTTP (or, given a certificate, HTTPS) server on
 * 127.0.0.1 that records every request it gets and answers what the test
 * says: a status, or a promise the test settles (to hold a delivery in
 * flight). Closed at teardown.
 */
import { createServer as createHttpServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import type { Teardown } from './teardown.js'

export interface Received {
  headers: Record<string, string>
  body: string
  path: string
}

/** What to answer a request: a status, or a promise of one. */
export type Answer = (request: Received, index: number) => number | Promise<number>

export interface WebhookReceiver {
  url: string
  received: Received[]
  /** Replaces how requests are answered (200 by default). */
  answer: Answer
}

export async function startWebhookReceiver(t: Teardown, tls?: { cert: string; key: string }): Promise<WebhookReceiver> {
  const receiver: WebhookReceiver = { url: '', received: [], answer: () => 200 }
  const handle = (request: IncomingMessage, response: ServerResponse): void => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]))
      const received = { headers, body: Buffer.concat(chunks).toString('utf8'), path: request.url ?? '' }
      receiver.received.push(received)
      void Promise.resolve(receiver.answer(received, receiver.received.length - 1)).then((status) => {
        response.writeHead(status, { 'content-type': 'text/plain' }).end('ok')
      })
    })
  }
  const server = tls === undefined ? createHttpServer(handle) : createHttpsServer(tls, handle)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  const { port } = server.address() as AddressInfo
  receiver.url = `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${port}/hooks`
  return receiver
}
