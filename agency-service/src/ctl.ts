/**
 * The operator CLI (`npm run --silent ctl -- …`). One JSON document on
 * stdout; on failure exit status 1 and the error envelope on stderr.
 * Migrations are applied before every command, so a fresh database works.
 */
import { userInfo } from 'node:os'
import { parseArgs } from 'node:util'
import type { ParseArgsConfig } from 'node:util'
import { readDatabaseUrl, readRedisKeyPrefix, readRedisUrl, EMBEDDED_POSTGRES_PORT } from '@scoped/shared/config'
import type { Env } from '@scoped/shared/config'
import { createPool } from '@scoped/shared/db'
import type { Pool } from '@scoped/shared/db'
import { ApiError, errorEnvelope } from '@scoped/shared/errors'
import { migrate } from '@scoped/shared/migrate'
import { KeyService } from './keys/key-service.js'
import type { KeyOwner } from './keys/key-service.js'
import { createAgency, createSubAccount, createUser } from './tenants.js'
import { createKeyInvalidator } from './invalidator.js'
import { localOnlyInvalidator } from '@scoped/shared/key-invalidation'

class UsageError extends Error {}

const USAGE = `usage: ctl <command>
  migrate
  agency create --name N
  sub-account create --agency A --name N
  user create --email E --agency A --role owner|admin|member [--sub-account S]   (password on stdin)
  key create --agency A --name N | key create --sub-account S --name N
  key list --agency A | key list --sub-account S
  key revoke K
  key delete K`

const options = {
  name: { type: 'string' },
  agency: { type: 'string' },
  'sub-account': { type: 'string' },
  email: { type: 'string' },
  role: { type: 'string' },
} as const satisfies ParseArgsConfig['options']

type Flags = { [K in keyof typeof options]?: string }

function parse(argv: string[]): { words: string[]; flags: Flags } {
  try {
    const { positionals, values } = parseArgs({ args: argv, options, allowPositionals: true, strict: true })
    return { words: positionals, flags: values }
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
}

function required(flags: Flags, name: keyof Flags): string {
  const value = flags[name]
  if (value === undefined) throw new UsageError(`--${name} is required`)
  return value
}

function keyOwner(flags: Flags): KeyOwner {
  if (flags.agency !== undefined && flags['sub-account'] !== undefined) throw new UsageError('give --agency or --sub-account, not both')
  if (flags.agency !== undefined) return { scope: 'AGENCY', agencyId: flags.agency }
  if (flags['sub-account'] !== undefined) return { scope: 'SUB-ACCOUNT', subAccountId: flags['sub-account'] }
  throw new UsageError('--agency or --sub-account is required')
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('password: ')
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '')
}

/** Who did it, for the audit trail; a container may run under a uid that has no account name. */
function operatorName(): string {
  try {
    return userInfo().username
  } catch {
    return `uid-${process.getuid?.() ?? 'unknown'}`
  }
}

const actor = `ctl:${operatorName()}`

async function run(pool: Pool, env: Env, words: string[], flags: Flags): Promise<unknown> {
  const [noun, verb, argument, ...extra] = words
  if (extra.length > 0) throw new UsageError(`unexpected argument: ${extra[0]}`)
  const command = `${noun ?? ''} ${verb ?? ''}`.trim()

  if (command === 'migrate') return { applied: await migrate(readDatabaseUrl(env).url) }
  if (command === 'agency create') return createAgency(pool, required(flags, 'name'))
  if (command === 'sub-account create') return createSubAccount(pool, required(flags, 'agency'), required(flags, 'name'))
  if (command === 'user create') {
    return createUser(pool, {
      email: required(flags, 'email'),
      agencyId: required(flags, 'agency'),
      role: required(flags, 'role'),
      subAccountId: flags['sub-account'],
      password: await readStdin(),
    })
  }
  if (noun === 'key') {
    const invalidator = verb === 'revoke' || verb === 'delete' ? await createKeyInvalidator(readRedisUrl(env), readRedisKeyPrefix(env), 'ctl') : undefined
    const keys = new KeyService(pool, invalidator ?? localOnlyInvalidator)
    try {
      switch (verb) {
        case 'create': {
          const created = await keys.create(keyOwner(flags), required(flags, 'name'), actor)
          return { id: created.id, name: created.name, scope: created.scope, key: created.key }
        }
        case 'list':
          return (await keys.list(keyOwner(flags))).map(({ id, name, scope, status, createdAt, lastUsedAt, revokedAt }) => ({
            id,
            name,
            scope,
            status,
            createdAt,
            lastUsedAt,
            revokedAt,
          }))
        case 'revoke': {
          if (argument === undefined) throw new UsageError('key revoke needs a key id')
          const result = await keys.revoke(argument, actor)
          return { id: result.id, status: 'revoked' }
        }
        case 'delete': {
          if (argument === undefined) throw new UsageError('key delete needs a key id')
          const result = await keys.delete(argument, actor)
          return { id: result.id, deleted: true }
        }
      }
    } finally {
      await invalidator?.close()
    }
  }
  throw new UsageError(command === '' ? 'no command given' : `unknown command: ${words.join(' ')}`)
}

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
    if (words[0] !== 'migrate') await migrate(database.url)
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

process.exitCode = await main()
