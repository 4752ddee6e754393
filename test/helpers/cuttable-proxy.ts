/**
 * A TCP proxy to a server (Postgres, say) that a test can cut, as if the
 * network or the server went away (open connections are destroyed and its
 * port refuses new ones), and restore on the same port. Cut at teardown.
 */
import { connect, createServer } from 'node:net'
import type { Server, Socket } from 'node:net'
import { freePort } from './processes.js'
import type { Teardown } from './teardown.js'

export interface CuttableProxy {
  port: number
  /** `url` with its port replaced by the proxy's: what the code under test connects to. */
  url: string
  cut(): Promise<void>
  restore(): Promise<void>
}

/** A proxy in front of the server of `url` (host and port, 5432 when the URL names none). */
export async function cuttableProxy(t: Teardown, url: string): Promise<CuttableProxy> {
  const target = new URL(url)
  const port = await freePort()
  const sockets = new Set<Socket>()
  let server: Server | undefined
  const restore = (): Promise<void> =>
    new Promise((resolve) => {
      if (server?.listening) return resolve()
      server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname)
        for (const socket of [client, upstream]) {
          sockets.add(socket)
          socket.on('close', () => sockets.delete(socket))
          socket.on('error', () => undefined)
        }
        client.pipe(upstream).pipe(client)
      })
      server.listen(port, '127.0.0.1', resolve)
    })
  const cut = (): Promise<void> =>
    new Promise((resolve) => {
      for (const socket of sockets) socket.destroy()
      if (server?.listening) server.close(() => resolve())
      else resolve()
    })
  await restore()
  t.teardown(cut)
  const proxied = new URL(url)
  proxied.hostname = '127.0.0.1'
  proxied.port = String(port)
  return { port, url: proxied.href, cut, restore }
}
