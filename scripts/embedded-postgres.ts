/**
 * The embedded Postgres of `npm start`: PGlite (Postgres compiled to WASM)
 * with its data under .data/pglite, served on the Postgres wire protocol so
 * every process connects with `pg` exactly as to a real server.
 *
 * PGlite is one backend session shared by all connections: transactions run
 * one at a time, LISTEN/NOTIFY does not cross connections and named prepared
 * statements would collide. The services are written to stay correct on it
 * (one client per transaction, unnamed statements, invalidation without NOTIFY).
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketServer } from '@electric-sql/pglite-socket'
import { EMBEDDED_POSTGRES_PORT } from '@scoped/shared/config'

export interface EmbeddedPostgres {
  url: string
  stop(): Promise<void>
}

export async function startEmbeddedPostgres(dataRoot: string, port = EMBEDDED_POSTGRES_PORT): Promise<EmbeddedPostgres> {
  const dataDir = join(dataRoot, 'pglite')
  mkdirSync(dataDir, { recursive: true })
  const db = await PGlite.create(dataDir)
  // Enough for every pool of the stack (gateway, two services) plus the CLI and migrations.
  const server = new PGLiteSocketServer({ db, host: '127.0.0.1', port, maxConnections: 100 })
  try {
    await server.start()
  } catch (error) {
    await db.close()
    const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined
    if (code === 'EADDRINUSE') throw new Error(`port ${port} is in use: is another \`npm start\` running?`, { cause: error })
    throw error
  }
  return {
    url: `postgresql://postgres@127.0.0.1:${port}/postgres`,
    async stop() {
      await server.stop()
      await db.close()
    },
  }
}
