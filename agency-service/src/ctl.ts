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
import { migrate, migrateOrWait } from '@scoped/shared/migrate'
import { requireDuration } from '@scoped/shared/durations'
import { parseDecimal } from '@scoped/shared/rate-limit'
import { requireIsoTime } from '@scoped/shared/validation'
import { KeyService, MAX_GRACE_SECONDS } from './keys/key-service.js'
import type { KeyOwner, RateLimitInput } from './keys/key-service.js'
import { TenantStore } from './tenants.js'
import { createKeyInvalidator } from './invalidator.js'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import { grantLogin } from './db-logins.js'
import { readPassword } from './password-prompt.js'
import { MembershipService } from './users/memberships.js'
import { UserService } from './users/user-service.js'

class UsageError extends Error {}

const USAGE = `usage: ctl <command>
  migrate
  agency create --name N
  sub-account create --agency A --name N
  user create --email E --agency A --role owner|admin|member [--sub-account S]   (password on stdin)
  user disable --email E                                         (ends the user's sessions at once; sign-in refused)
  user password --email E                                        (new password on stdin; ends the user's sessions)
  user remove --email E (--agency A | --sub-account S)           (an agency membership takes its sub-account memberships with it)
  key create --agency A --name N | key create --sub-account S --name N
      [--expires-in D | --expires-at ISO] [--allow-cidr C]...     (D: an integer and s, m, h or d: 90d)
      [--rate R --burst B]                                       (the key's own rate limit: R tokens per second, B at most)
  key list --agency A | key list --sub-account S
  key roll K [--grace D]                                         (K works until now + D; at once without --grace)
  key update K [(--allow-cidr C)... | --allow-any] [--rate R --burst B | --clear-rate-limit]   (at least one)
  key revoke K
  key delete K
  db grant-login --role scoped_gateway|scoped_resource|scoped_agency --user U   (password on stdin; as the migrating role)`

const options = {
  name: { type: 'string' },
  agency: { type: 'string' },
  'sub-account': { type: 'string' },
  email: { type: 'string' },
  role: { type: 'string' },
  'expires-in': { type: 'string' },
  'expires-at': { type: 'string' },
  'allow-cidr': { type: 'string', multiple: true },
  'allow-any': { type: 'boolean' },
  rate: { type: 'string' },
  burst: { type: 'string' },
  'clear-rate-limit': { type: 'boolean' },
  grace: { type: 'string' },
  user: { type: 'string' },
} as const satisfies ParseArgsConfig['options']

type OptionName = keyof typeof options
type StringFlag = {
  [K in OptionName]: (typeof options)[K]['type'] extends 'string' ? ((typeof options)[K] extends { multiple: true } ? never : K) : never
}[OptionName]
type Flags = { [K in StringFlag]?: string } & { 'allow-cidr'?: string[]; 'allow-any'?: boolean; 'clear-rate-limit'?: boolean }

function parse(argv: string[]): { words: string[]; flags: Flags } {
  try {
    const { positionals, values } = parseArgs({ args: argv, options, allowPositionals: true, strict: true })
    return { words: positionals, flags: values }
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
}

function required(flags: Flags, name: StringFlag): string {
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

/** The longest --expires-in: 100 years. */
const MAX_EXPIRY_SECONDS = 36_500 * 86_400

/** The expiry asked for with --expires-in or --expires-at, or null. */
function expiryOf(flags: Flags): Date | null {
  if (flags['expires-in'] !== undefined && flags['expires-at'] !== undefined) throw new UsageError('give --expires-in or --expires-at, not both')
  if (flags['expires-in'] !== undefined) return new Date(Date.now() + requireDuration(flags['expires-in'], '--expires-in', 1, MAX_EXPIRY_SECONDS) * 1000)
  if (flags['expires-at'] !== undefined) return requireIsoTime(flags['expires-at'], '--expires-at')
  return null
}

/** The names of the rate-limit flags, for the key service's messages. */
const RATE_LIMIT_FIELDS = { rate: '--rate', burst: '--burst' } as const

/**
 * The key's own rate limit asked for: `--rate R --burst B` (both or neither;
 * checked by the key service), null with --clear-rate-limit (where `clear` is
 * allowed), undefined when not asked.
 */
function rateLimitOf(flags: Flags, clear: boolean): RateLimitInput | null | undefined {
  const given = flags.rate !== undefined || flags.burst !== undefined
  if (flags['clear-rate-limit'] === true) {
    if (!clear) throw new UsageError('--clear-rate-limit is for key update')
    if (given) throw new UsageError('give --rate and --burst, or --clear-rate-limit, not both')
    return null
  }
  if (!given) return undefined
  if (flags.rate === undefined || flags.burst === undefined) throw new UsageError('give --rate and --burst together')
  return { rate: parseDecimal(flags.rate), burst: parseDecimal(flags.burst) }
}

/**
 * Who did it, for the audit trail: CTL_ACTOR (the operator's name, so that
 * operators sharing one container account are told apart), required when
 * NODE_ENV=production (the image sets it); elsewhere, when unset, the OS
 * account; a container may run under a uid that has no account name.
 */
function operatorName(env: Env): string {
  const named = env['CTL_ACTOR']?.trim()
  if (named !== undefined && named !== '') {
    if (!/^[\p{L}\p{N} ._@+-]{1,100}$/u.test(named)) throw new UsageError('CTL_ACTOR must be 1 to 100 letters, digits, spaces or . _ @ + -')
    return named
  }
  // In production the container's account is shared by every operator, so it names nobody.
  if (env['NODE_ENV'] === 'production') {
    throw new UsageError('CTL_ACTOR is required when NODE_ENV=production: set it to your name (CTL_ACTOR=alice), which the audit trail records')
  }
  try {
    return userInfo().username
  } catch {
    return `uid-${process.getuid?.() ?? 'unknown'}`
  }
}

/** The commands that write no audit event; any other (a new one included) needs an operator's name. */
const COMMANDS_WITHOUT_EVENTS: ReadonlySet<string> = new Set(['', 'migrate', 'agency create', 'key list', 'db grant-login'])

/** The membership `user remove` is about: --agency A or --sub-account S, exactly one. */
function membershipOf(flags: Flags): { agencyId: string } | { subAccountId: string } {
  if (flags.agency !== undefined && flags['sub-account'] !== undefined) throw new UsageError('give --agency or --sub-account, not both')
  if (flags.agency !== undefined) return { agencyId: flags.agency }
  if (flags['sub-account'] !== undefined) return { subAccountId: flags['sub-account'] }
  throw new UsageError('--agency or --sub-account is required')
}

async function run(pool: Pool, env: Env, words: string[], flags: Flags): Promise<unknown> {
  const [noun, verb, argument, ...extra] = words
  if (extra.length > 0) throw new UsageError(`unexpected argument: ${extra[0]}`)
  const command = `${noun ?? ''} ${verb ?? ''}`.trim()
  // Every command that writes an audit event names its operator; only these write none (and need no CTL_ACTOR).
  const actor = COMMANDS_WITHOUT_EVENTS.has(command) ? 'ctl' : `ctl:${operatorName(env)}`

  if (command === 'migrate') return { applied: await migrate(readDatabaseUrl(env).url) }
  if (command === 'agency create') return new TenantStore(pool).createAgency(required(flags, 'name'))
  if (command === 'sub-account create') return new TenantStore(pool).createSubAccount(required(flags, 'agency'), required(flags, 'name'), actor)
  if (command === 'user create') {
    return new TenantStore(pool).createUser(
      {
        email: required(flags, 'email'),
        agencyId: required(flags, 'agency'),
        role: required(flags, 'role'),
        subAccountId: flags['sub-account'],
        password: await readPassword('password'),
      },
      actor,
    )
  }
  if (command === 'user disable') return new UserService(pool).disable(required(flags, 'email'), actor)
  if (command === 'user password') {
    const users = new UserService(pool)
    // Found first, so nobody types a new password twice for an email that does not exist.
    const user = await users.findByEmail(required(flags, 'email'))
    return users.setPassword(user, await readPassword('new password'), actor)
  }
  if (command === 'user remove') return new MembershipService(pool).remove(required(flags, 'email'), membershipOf(flags), actor)
  if (command === 'db grant-login') {
    return grantLogin(pool, { role: required(flags, 'role'), user: required(flags, 'user'), password: await readPassword('password of the login') })
  }
  if (noun === 'key') {
    // Redis only for the commands that end or change a key: the fast path of telling the gateways (Postgres confirms either way).
    const endsKey = verb === 'revoke' || verb === 'delete' || verb === 'roll' || verb === 'update'
    const invalidator = createKeyInvalidator(
      pool,
      { redisUrl: endsKey ? readRedisUrl(env) : undefined, redisKeyPrefix: readRedisKeyPrefix(env), keyCacheSecret: readKeyCacheSecret(env) },
      'ctl',
    )
    const keys = new KeyService(pool, invalidator)
    try {
      switch (verb) {
        case 'create': {
          const created = await keys.create(keyOwner(flags), required(flags, 'name'), actor, {
            expiresAt: expiryOf(flags),
            allowedCidrs: flags['allow-cidr'] ?? [],
            rateLimit: rateLimitOf(flags, false),
            fields: {
              expiresAt: flags['expires-in'] === undefined ? '--expires-at' : '--expires-in',
              allowedCidrs: '--allow-cidr',
              ...RATE_LIMIT_FIELDS,
            },
          })
          return {
            id: created.id,
            name: created.name,
            scope: created.scope,
            key: created.key,
            expiresAt: created.expiresAt,
            allowedCidrs: created.allowedCidrs,
            // Only when asked for: the contract's shape otherwise.
            ...(created.rateLimit === null ? {} : { rateLimit: created.rateLimit }),
          }
        }
        case 'list':
          return (await keys.list(keyOwner(flags))).map(
            ({ id, name, scope, status, createdAt, lastUsedAt, lastUsedIp, revokedAt, expiresAt, replacedBy, allowedCidrs, rateLimit }) => ({
              id,
              name,
              scope,
              status,
              createdAt,
              lastUsedAt,
              lastUsedIp,
              revokedAt,
              expiresAt,
              replacedBy,
              allowedCidrs,
              // Only for a key with a limit of its own: the contract's item otherwise.
              ...(rateLimit === null ? {} : { rateLimit }),
            }),
          )
        case 'roll': {
          if (argument === undefined) throw new UsageError('key roll needs a key id')
          const graceSeconds = flags.grace === undefined ? 0 : requireDuration(flags.grace, '--grace', 0, MAX_GRACE_SECONDS)
          const rolled = await keys.roll(argument, actor, undefined, { graceSeconds })
          // The new key is printed whatever happens: its plaintext exists nowhere else. An unconfirmed invalidation is said on stderr.
          if (rolled.unconfirmed !== undefined) process.stderr.write(`warning: ${rolled.unconfirmed}\n`)
          return { id: rolled.id, name: rolled.name, scope: rolled.scope, key: rolled.key, replaces: rolled.replaces }
        }
        case 'update': {
          if (argument === undefined) throw new UsageError('key update needs a key id')
          const cidrs = flags['allow-cidr']
          if (flags['allow-any'] === true && cidrs !== undefined) throw new UsageError('give --allow-cidr or --allow-any, not both')
          const allowlist = flags['allow-any'] === true ? [] : cidrs
          const rateLimit = rateLimitOf(flags, true)
          if (allowlist === undefined && rateLimit === undefined) {
            throw new UsageError('key update needs --allow-cidr C (repeatable) or --allow-any, and/or --rate R --burst B or --clear-rate-limit')
          }
          const updated = await keys.update(argument, {
            actor,
            allowedCidrs: allowlist,
            rateLimit,
            fields: { allowedCidrs: '--allow-cidr', ...RATE_LIMIT_FIELDS },
          })
          // What was changed, and only that: `{"id","allowedCidrs"}` for an allowlist alone (the contract's shape).
          return {
            id: updated.id,
            ...(allowlist === undefined ? {} : { allowedCidrs: updated.allowedCidrs }),
            ...(rateLimit === undefined ? {} : { rateLimit: updated.rateLimit }),
          }
        }
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
      await invalidator.close()
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
