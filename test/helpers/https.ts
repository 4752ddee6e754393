/**
 * Talking to the gateway over HTTPS in tests: an undici client that sends the
 * path exactly as given (no URL normalization) and trusts one certificate, a
 * raw TLS socket for bytes no HTTP client would send, and a throw-away
 * certificate for TLS_CERT_FILE / TLS_KEY_FILE.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { connect } from 'node:tls'
import { join } from 'node:path'
import { generate } from 'selfsigned'
import { Agent } from 'undici'
import type { Dispatcher } from 'undici'
import { OpenApiCheck } from './openapi-check.js'
import type { Teardown } from './teardown.js'

export interface HttpsResponse {
  status: number
  headers: Record<string, string | string[] | undefined>
  /** The body's bytes as they came (never decompressed). */
  body: Buffer
  text: string
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: any // eslint-disable-line @typescript-eslint/no-explicit-any -- test assertions read arbitrary fields
}

export interface RequestOptions {
  method?: Dispatcher.HttpMethod
  /** An object, or a flat [name, value, name, value, …] list to send repeated headers. */
  headers?: Record<string, string> | string[]
  body?: string | Buffer
}

export interface HttpsClient {
  request(path: string, options?: RequestOptions): Promise<HttpsResponse>
  close(): Promise<void>
}

export interface HttpsClientOptions {
  /**
   * Check every response under /v1 against the API description the gateway
   * serves (openapi-check.ts): a response the document does not describe
   * rejects the request with the problems.
   */
  openapi?: boolean
}

/** A client for https://127.0.0.1:<port> that trusts `ca` (and checks the name `localhost`). */
export function httpsClient(t: Teardown, port: number, ca: string, clientOptions: HttpsClientOptions = {}): HttpsClient {
  const agent = new Agent({ connect: { ca, servername: 'localhost' } })
  const origin = `https://127.0.0.1:${port}`
  t.teardown(() => agent.close())
  const send = async (path: string, options: RequestOptions): Promise<HttpsResponse> => {
    const response = await agent.request({ origin, path, method: options.method ?? 'GET', headers: options.headers, body: options.body })
    const body = Buffer.from(await response.body.arrayBuffer())
    const text = body.toString('utf8')
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    return { status: response.statusCode, headers: response.headers, body, text, json }
  }
  let check: Promise<OpenApiCheck> | undefined
  const served = async (): Promise<OpenApiCheck> => {
    const document = await send('/openapi.json', {})
    if (document.status !== 200) throw new Error(`GET /openapi.json answered ${document.status}`)
    return new OpenApiCheck(document.json as Record<string, unknown>)
  }
  return {
    async request(path, options = {}) {
      const response = await send(path, options)
      if (clientOptions.openapi === true) {
        check ??= served()
        const problems = (await check).check(options.method ?? 'GET', path, response)
        if (problems.length > 0) throw new Error(`the response is not what /openapi.json describes:\n${problems.join('\n')}`)
      }
      return response
    },
    close: () => agent.close(),
  }
}

/** Sends `head` (request line and headers, raw bytes) over TLS and answers the raw response text. */
export function rawHttpsRequest(port: number, ca: string, head: Buffer | string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () =>
      socket.end(typeof head === 'string' ? Buffer.from(head, 'latin1') : head),
    )
    let text = ''
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')))
    socket.on('error', reject)
    socket.on('close', () => resolve(text))
  })
}

/** The status code of a raw response. */
export function rawStatus(response: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(response)?.[1] ?? 0)
}

/** A self-signed certificate for localhost / 127.0.0.1, written to `dir`. */
export async function makeCertificate(dir: string): Promise<{ certFile: string; keyFile: string; cert: string }> {
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    extensions: [
      { name: 'basicConstraints', cA: false },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  })
  const certFile = join(dir, 'cert.pem')
  const keyFile = join(dir, 'key.pem')
  writeFileSync(certFile, pems.cert)
  writeFileSync(keyFile, pems.private)
  return { certFile, keyFile, cert: readFileSync(certFile, 'utf8') }
}
