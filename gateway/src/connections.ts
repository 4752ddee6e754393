/**
 * Every connection ends: the connections of one listener, counted and
 * bounded, and cut when the listener stops, whatever their clients do.
 *
 * - A cap on the listener's TCP connections (net.Server's maxConnections):
 *   one past it is closed as soon as it is accepted, and counted.
 * - A cap per client (an IPv4 address, or the /64 of an IPv6 one, as every
 *   per-client budget): one client cannot take the whole cap and lock every
 *   other client out. A trusted proxy (GATEWAY_TRUSTED_PROXIES) speaks for
 *   many clients, so only the overall cap bounds it.
 * - On a TLS listener, a connection whose handshake has not finished is not
 *   yet known to Node's HTTP server, so neither its deadlines nor its
 *   closeAllConnections() reach it (and a server.close() waits for it):
 *   stop() cuts those at once, and cutAll() cuts every connection there is.
 *
 * The counts are read by /metrics (gateway_connections_open,
 * gateway_connections_refused_total).
 */
import type { Server } from 'node:net'
import type { Socket } from 'node:net'
import type { TLSSocket } from 'node:tls'
import { clientGroup } from '@scoped/shared/ip-address'
import type { TrustedProxies } from './client-address.js'
import type { ConnectionListener, GatewayMetrics } from './metrics.js'

export interface ConnectionLimits {
  /** TCP connections open at once on the listener. */
  readonly max: number
  /** Of which one client (address, or IPv6 /64) may hold; trusted proxies are not counted. */
  readonly perClient: number
}

export interface ConnectionGuardOptions {
  listener: ConnectionListener
  limits: ConnectionLimits
  metrics: GatewayMetrics
  trustedProxies?: TrustedProxies
}

/** The TCP peer of a socket, as one key per connection: its address and port. */
function peerKey(socket: Socket): string {
  return `${socket.remoteAddress ?? ''}|${socket.remotePort ?? 0}`
}

export class ConnectionGuard {
  private readonly sockets = new Set<Socket>()
  private readonly perClient = new Map<string, number>()
  /** TLS listeners only: connections whose handshake has not finished, by peer. */
  private readonly handshaking = new Map<string, Socket>()
  private readonly tls: boolean

  constructor(
    private readonly server: Server,
    private readonly options: ConnectionGuardOptions,
  ) {
    this.tls = typeof (server as Partial<{ addContext: unknown }>).addContext === 'function'
    server.maxConnections = options.limits.max
    // Node closes a connection past maxConnections before any listener sees it, and says so with 'drop'.
    server.on('drop', () => options.metrics.countRefusedConnection(options.listener, 'cap'))
    server.on('connection', (socket: Socket) => this.admit(socket))
    if (this.tls) server.on('secureConnection', (socket: TLSSocket) => this.handshaking.delete(peerKey(socket)))
    options.metrics.connectionsOpen(options.listener, () => this.sockets.size)
  }

  private admit(socket: Socket): void {
    const address = socket.remoteAddress ?? ''
    const group = this.options.trustedProxies?.has(address) === true ? undefined : clientGroup(address)
    if (group !== undefined) {
      const held = this.perClient.get(group) ?? 0
      if (held >= this.options.limits.perClient) {
        this.options.metrics.countRefusedConnection(this.options.listener, 'per-client')
        socket.destroy()
        return
      }
      this.perClient.set(group, held + 1)
    }
    this.sockets.add(socket)
    const key = this.tls ? peerKey(socket) : undefined
    if (key !== undefined) this.handshaking.set(key, socket)
    socket.once('close', () => {
      this.sockets.delete(socket)
      if (key !== undefined && this.handshaking.get(key) === socket) this.handshaking.delete(key)
      if (group === undefined) return
      const left = (this.perClient.get(group) ?? 1) - 1
      if (left === 0) this.perClient.delete(group)
      else this.perClient.set(group, left)
    })
  }

  /** TCP connections open now. */
  get open(): number {
    return this.sockets.size
  }

  /** Cuts every connection still in its TLS handshake: it carries no request, and would hold the listener's close. */
  cutHandshaking(): void {
    for (const socket of this.handshaking.values()) socket.destroy()
    this.handshaking.clear()
  }

  /** Cuts every connection of the listener, whatever it is doing. */
  cutAll(): void {
    for (const socket of this.sockets) socket.destroy()
  }
}
