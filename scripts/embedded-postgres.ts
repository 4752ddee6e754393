/**
 * The embedded Postgres of `npm start`: PGlite (Postgres compiled to WASM)
 * with its data under .data/pglite, served on the Postgres wire protocol so
 * every process connects with `pg` exactly as to a real server.
 *
 * PGlite is one backend session shared by all connections. Its server here
 * keeps them apart as far as one session can (pglite-session-queue.ts: one
 * connection's exchange or transaction at a time); what it cannot, the
 * services allow for: LISTEN/NOTIFY does not cross connections (invalidation
 * goes without it), `SET` and advisory locks are the whole session's (none is
 * relied on: migrations run in one transaction), and a named prepared statement
 * is the whole session's (the key lookup falls back to an unnamed one).
 */
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { PGlite } from '@electric-sql/pglite'
import { EMBEDDED_POSTGRES_PORT } from '@scoped/shared/config'
import { serveSessions } from './pglite-session-queue.js'
import type { SessionServer } from './pglite-session-queue.js'

export interface EmbeddedPostgres {
  url: string
  stop(): Promise<void>
}

export async function startEmbeddedPostgres(dataRoot: string, port = EMBEDDED_POSTGRES_PORT): Promise<EmbeddedPostgres> {
  const dataDir = join(dataRoot, 'pglite')
  mkdirSync(dataDir, { recursive: true })
  const db = await PGlite.create(dataDir)
  let server: SessionServer
  try {
    // Enough for every pool of the stack (gateway, two services) plus the CLI and migrations.
    server = await serveSessions(db, '127.0.0.1', port, 100)
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
