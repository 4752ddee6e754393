/**
 * The plain-HTTP listener (spec §5.3: plain HTTP is rejected before it
 * reaches the API). Every request gets the error envelope and the connection
 * is closed; nothing here reads a key, a body, or forwards anything. It has
 * the API listener's header and request deadlines, checked as often, so a
 * connection that sends nothing (or half a request) cannot be held here
 * either.
 */
import { createServer } from 'node:http'
import type { Server } from 'node:http'
import type { Logger } from '@scoped/shared/logger'
import { errorCatalog, errorEnvelope } from '@scoped/shared/errors'
import type { Deadlines } from './config.js'
import { MAX_HEADER_BYTES } from './config.js'
import type { GatewayMetrics } from './metrics.js'

const { status, message } = errorCatalog.httpsRequired
const BODY = JSON.stringify(errorEnvelope(message))

export function createPlainHttpServer(log: Logger, metrics: GatewayMetrics, deadlines: Deadlines): Server {
  const options = {
    headersTimeout: deadlines.headers,
    requestTimeout: deadlines.request,
    keepAliveTimeout: deadlines.keepAlive,
    connectionsCheckingInterval: 500,
    maxHeaderSize: MAX_HEADER_BYTES,
  }
  const server = createServer(options, (request, response) => {
    metrics.countRequest('https-required', null, null)
    log.info({ method: request.method, outcome: 'https-required', status }, 'request')
    response.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(BODY),
      connection: 'close',
    })
    response.end(BODY)
  })
  // Bytes that are not HTTP, or a deadline passed: Node's own answer (400, 408, 431), and the connection destroyed.
  return server
}
