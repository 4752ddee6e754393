/**
 * The HTTPS API listener: Fastify with the gateway's TLS, deadlines and size
 * caps, the gate (gate.ts), the forwarder (forwarder.ts) and one log line per
 * request. Errors Node raises before Fastify sees a request (header block too
 * large, headers or request too slow, unparsable bytes) are answered here in
 * the error envelope, and the connection closed.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import Fastify, { LogController } from 'fastify'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { errorEnvelopePlugin } from '@scoped/shared/error-envelope-plugin'
import { errorCatalog, errorEnvelope } from '@scoped/shared/errors'
import type { Logger } from '@scoped/shared/logger'
import type { GatewayConfig } from './config.js'
import type { RequestLogger } from './request-log.js'
import { MAX_HEADER_BYTES } from './config.js'
import { documentsPlugin } from './documents.js'
import type { ForwarderOptions } from './forwarder.js'
import { forwarderPlugin } from './forwarder.js'
import type { GateOptions } from './gate.js'
import { gatePlugin } from './gate.js'
import type { GatewayMetrics } from './metrics.js'
import { logRequest } from './request-log.js'
import { refuse, STRICT_TRANSPORT_SECURITY } from './respond.js'
import type { TlsCredentials } from './tls.js'
import { MIN_TLS_VERSION, TLS12_CIPHERS } from './tls.js'
import type { UsageRecorder } from './usage/usage-recorder.js'

/**
 * x-request-id: the caller's when it is well formed (at most 128 of
 * [A-Za-z0-9._-], and not shaped like an API key, since it is logged), else a
 * new one: this process's random prefix and a counter, unique across replicas
 * and cheaper than a UUID per request.
 */
const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/
const idPrefix = randomUUID()
let idCounter = 0
export function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id']
  if (typeof given === 'string' && REQUEST_ID.test(given) && !given.toLowerCase().includes('_live_')) return given
  return `${idPrefix}-${(idCounter++).toString(36)}`
}

/**
 * The logger Fastify hands each request: the gateway's own, whose child() is
 * itself, so no pino child is built per request. Done here rather than with
 * Fastify's `childLoggerFactory` option: with a factory of its own Fastify
 * checks the logger it returns (its seven methods) on every request.
 */
function requestLogger(log: Logger): FastifyBaseLogger {
  const same: FastifyBaseLogger = Object.create(log as FastifyBaseLogger, { child: { value: () => same } }) as FastifyBaseLogger
  return same
}

function rawResponse(status: number, reason: string, message: string): string {
  const body = JSON.stringify(errorEnvelope(message))
  return (
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `Strict-Transport-Security: ${STRICT_TRANSPORT_SECURITY}\r\nConnection: close\r\n\r\n${body}`
  )
}

/** Node's errors before a request reaches Fastify, by code: the response and the outcome counted. */
const CLIENT_ERRORS = {
  HPE_HEADER_OVERFLOW: { response: rawResponse(431, 'Request Header Fields Too Large', errorCatalog.headersTooLarge.message), outcome: 'headers-too-large' },
  ERR_HTTP_REQUEST_TIMEOUT: { response: rawResponse(408, 'Request Timeout', errorCatalog.requestTimeout.message), outcome: 'request-timeout' },
} as const
const BAD_REQUEST = rawResponse(400, 'Bad Request', errorCatalog.badRequest.message)
/** How long an answered connection may take to read its error answer before it is cut. */
const ERROR_LINGER_MS = 1_000

/**
 * A connection Node's HTTP server gave up on (a TLS error, a handshake that
 * took too long, bytes that are not HTTP) ends here, whatever its client
 * does. An HTTP error is answered in the envelope and the connection closed
 * once the answer is written (or after ERROR_LINGER_MS, for a client that
 * reads nothing); anything else, and a TLS connection that never finished
 * its handshake above all, is destroyed at once: `end()` on such a socket
 * writes nothing and closes nothing, and it would stay open for good.
 */
export function endClientError(error: NodeJS.ErrnoException, socket: Socket, metrics: GatewayMetrics): void {
  const known = CLIENT_ERRORS[error.code as keyof typeof CLIENT_ERRORS]
  if (known !== undefined) metrics.countRequest(known.outcome, null, null)
  const httpError = known !== undefined || error.code?.startsWith('HPE_') === true
  if (!httpError || !socket.writable) {
    socket.destroy()
    return
  }
  socket.end(known?.response ?? BAD_REQUEST)
  const linger = setTimeout(() => socket.destroy(), ERROR_LINGER_MS)
  linger.unref()
  socket.once('finish', () => socket.destroy())
  socket.once('close', () => clearTimeout(linger))
}

export interface ApiServerDeps {
  config: GatewayConfig
  tls: TlsCredentials
  log: Logger
  requestLog: RequestLogger
  metrics: GatewayMetrics
  /** Counts every answer to a key's request, and keeps those the request log keeps. */
  usage: Pick<UsageRecorder, 'record'>
  gate: GateOptions
  forwarder: ForwarderOptions
}

export async function buildApiServer(deps: ApiServerDeps): Promise<FastifyInstance> {
  const { config, metrics, requestLog } = deps
  const { deadlines } = config
  const api = Fastify({
    https: {
      cert: deps.tls.cert,
      key: deps.tls.key,
      minVersion: MIN_TLS_VERSION,
      ciphers: TLS12_CIPHERS,
      honorCipherOrder: true,
      // Until its handshake is done a connection has no HTTP deadline at all (Node's own default is 120 s).
      handshakeTimeout: deadlines.handshake,
      // Passed through to Node's server: deadlines are checked every half second, header blocks are capped.
      ...({ connectionsCheckingInterval: 500, maxHeaderSize: MAX_HEADER_BYTES } as object),
    },
    loggerInstance: requestLogger(deps.log),
    // One line per request comes from logRequest.
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: requestId,
    bodyLimit: config.bodyLimit,
    exposeHeadRoutes: false,
    keepAliveTimeout: deadlines.keepAlive,
    requestTimeout: deadlines.request,
    // A connection on which nothing moves either way for this long is cut: a client that stopped reading its
    // answer (the request deadline no longer applies once the request is in), or one that vanished mid-answer.
    connectionTimeout: deadlines.request + deadlines.upstream,
    // Draining is answered by the gate, in the envelope.
    return503OnClosing: false,
    // The router only fails on percent-encoding it cannot decode, which the path rules refuse too.
    // Such a request passes no hook, so its log line is written here.
    frameworkErrors: (_error, request, reply) => {
      reply.header('strict-transport-security', STRICT_TRANSPORT_SECURITY).header('x-request-id', request.id)
      refuse(request, reply, 'bad-path')
      logRequest(requestLog, metrics, request, reply)
    },
    clientErrorHandler: (error: NodeJS.ErrnoException, socket: Socket) => endClientError(error, socket, metrics),
  })
  api.server.headersTimeout = deadlines.headers
  await api.register(errorEnvelopePlugin)
  await api.register(gatePlugin, deps.gate)
  // GET /openapi.json and /docs, before the forwarder's catch-all.
  await api.register(documentsPlugin, { limit: config.documentLimit, metrics })
  await api.register(forwarderPlugin, deps.forwarder)
  api.addHook('onResponse', (request, reply, done) => {
    logRequest(requestLog, metrics, request, reply)
    deps.usage.record(request, reply)
    done()
  })
  return api
}
