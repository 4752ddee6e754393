/**
 * The operator CLI (`npm run --silent ctl -- …`). One JSON document on
 * stdout; on failure exit status 1 and the error envelope on stderr.
 * Migrations are applied before every command, so a fresh database works.
 * The commands are in ctl/commands.ts, their flags in ctl/flags.ts.
 */
import { readDatabaseUrl, EMBEDDED_POSTGRES_PORT } from '@scoped/shared/config'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { ApiError, errorEnvelope } from '@scoped/shared/errors'
import { migrateOrWait } from '@scoped/shared/migrate'
import { run } from './ctl/commands.js'
import { parse, USAGE, UsageError } from './ctl/flags.js'

function describe(error: unknown, embedded: boolean): string {
  if (error instanceof UsageError) return `${error.message}\n${USAGE}`
  if (error instanceof ApiError) return error.message
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : ''
  if (embedded && code === 'ECONNREFUSED') {
    return `DATABASE_URL is unset and the embedded Postgres of \`npm start\` is not running on 127.0.0.1:${EMBEDDED_POSTGRES_PORT}`
  }
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND') return `cannot reach the database (${code})`
  return error instanceof Error ? error.message : String(error)
}

async function main(): Promise<number> {
  const env = process.env
  let embedded = false
  let pool: Pool | undefined
  try {
    const { words, flags } = parse(process.argv.slice(2))
    const database = readDatabaseUrl(env)
    embedded = database.embedded
    // A least-privilege role cannot migrate: it only checks that nothing is pending.
    if (words[0] !== 'migrate') await migrateOrWait(database.url, { waitMs: 0 })
    pool = createPool(database.url, { max: 2, applicationName: 'scoped-api-ctl' })
    const result = await run(pool, env, words, flags)
    process.stdout.write(`${JSON.stringify(result)}\n`)
    return 0
  } catch (error) {
    process.stderr.write(`${JSON.stringify(errorEnvelope(describe(error, embedded)))}\n`)
    return 1
  } finally {
    await pool?.end()
  }
}

// Exit explicitly: nothing (a Redis client still retrying, say) may keep the command from returning.
process.exit(await main())
