/**
 * The plain-HTTP listener (spec §5.3: plain HTTP is rejected before it
 * reaches the API). Every request gets the error envelope and the connection
 * is closed; nothing here reads a key, a body, or forwards anything.
 */
import { createServer } from 'node:http'
import type { Server } from 'node:http'
import type { Logger } from '@scoped/shared/logger'
import { errorCatalog, errorEnvelope } from '@scoped/shared/errors'
import type { GatewayMetrics } from './metrics.js'

const { status, message } = errorCatalog.httpsRequired
const BODY = JSON.stringify(errorEnvelope(message))

export function createPlainHttpServer(log: Logger, metrics: GatewayMetrics): Server {
  return createServer((request, response) => {
    metrics.countRequest('https-required', null, null)
    log.info({ method: request.method, outcome: 'https-required', status }, 'request')
    response.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(BODY),
      connection: 'close',
    })
    response.end(BODY)
  })
}
