/**
 * `ctl key …`: create, list, roll, update, revoke and delete, through the
 * same KeyService as the console and the API. Each prints the contract's
 * shape: a key's own rate limit appears only for a key that has one.
 */
import { readRedisKeyPrefix, readRedisUrl } from '@scoped/shared/config'
import { requireDuration } from '@scoped/shared/durations'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import { createKeyInvalidator } from '../invalidator.js'
import { KeyService, keyItem, MAX_GRACE_SECONDS } from '../keys/key-service.js'
import { readPermissionCatalog } from '../keys/permission-catalog.js'
import type { CommandContext } from './command-context.js'
import { expiryOf, keyOwner, permissionsOf, RATE_LIMIT_FIELDS, rateLimitOf, required, UsageError } from './flags.js'

type KeyCommand = (keys: KeyService, context: CommandContext) => Promise<unknown>

/** Redis only for the commands that end or change a key: the fast path of telling the gateways (Postgres confirms either way). */
function withKeys(command: KeyCommand, changesKeys: boolean): (context: CommandContext) => Promise<unknown> {
  return async (context) => {
    const { pool, env } = context
    const redisUrl = changesKeys ? readRedisUrl(env) : undefined
    const invalidator = createKeyInvalidator(pool, { redisUrl, redisKeyPrefix: readRedisKeyPrefix(env), keyCacheSecret: readKeyCacheSecret(env) }, 'ctl')
    try {
      // The permission names are the routes file's (ROUTES_FILE), as the gateway reads it.
      return await command(new KeyService(pool, invalidator, { permissions: readPermissionCatalog(env) }), context)
    } finally {
      await invalidator.close()
    }
  }
}

export const keyCommands = {
  'key create': withKeys(createKey, false),
  'key list': withKeys(async (keys, { flags }) => (await keys.list(keyOwner(flags))).map(keyItem), false),
  'key roll': withKeys(rollKey, true),
  'key update': withKeys(updateKey, true),
  'key revoke': withKeys(revokeKey, true),
  'key delete': withKeys(deleteKey, true),
}

async function revokeKey(keys: KeyService, { actor, argument }: CommandContext): Promise<unknown> {
  const result = await keys.revoke(keyArgument('revoke', argument), actor)
  return { id: result.id, status: 'revoked' }
}

async function deleteKey(keys: KeyService, { actor, argument }: CommandContext): Promise<unknown> {
  const result = await keys.delete(keyArgument('delete', argument), actor)
  return { id: result.id, deleted: true }
}

function keyArgument(verb: string, argument: string | undefined): string {
  if (argument === undefined) throw new UsageError(`key ${verb} needs a key id`)
  return argument
}

async function createKey(keys: KeyService, { actor, flags }: CommandContext): Promise<unknown> {
  const created = await keys.create(keyOwner(flags), required(flags, 'name'), actor, {
    expiresAt: expiryOf(flags),
    allowedCidrs: flags['allow-cidr'] ?? [],
    rateLimit: rateLimitOf(flags, false),
    permissions: permissionsOf(flags, false),
    fields: {
      expiresAt: flags['expires-in'] === undefined ? '--expires-at' : '--expires-in',
      allowedCidrs: '--allow-cidr',
      permissions: '--permission',
      ...RATE_LIMIT_FIELDS,
    },
  })
  // The key is printed whatever happens: its plaintext exists nowhere else. An unconfirmed creation is said on stderr.
  if (created.unconfirmed !== undefined) process.stderr.write(`warning: ${created.unconfirmed}\n`)
  const { id, name, scope, key, expiresAt, allowedCidrs, rateLimit, permissions } = created
  // Only when asked for: the contract's shape otherwise.
  return { id, name, scope, key, expiresAt, allowedCidrs, ...(permissions === null ? {} : { permissions }), ...(rateLimit === null ? {} : { rateLimit }) }
}

async function rollKey(keys: KeyService, { actor, argument, flags }: CommandContext): Promise<unknown> {
  const id = keyArgument('roll', argument)
  const graceSeconds = flags.grace === undefined ? 0 : requireDuration(flags.grace, { name: 'graceSeconds', label: '--grace' }, 0, MAX_GRACE_SECONDS)
  const rolled = await keys.roll(id, actor, undefined, { graceSeconds })
  // The new key is printed whatever happens: its plaintext exists nowhere else. An unconfirmed invalidation is said on stderr.
  if (rolled.unconfirmed !== undefined) process.stderr.write(`warning: ${rolled.unconfirmed}\n`)
  return { id: rolled.id, name: rolled.name, scope: rolled.scope, key: rolled.key, replaces: rolled.replaces }
}

async function updateKey(keys: KeyService, { actor, argument, flags }: CommandContext): Promise<unknown> {
  const id = keyArgument('update', argument)
  const cidrs = flags['allow-cidr']
  if (flags['allow-any'] === true && cidrs !== undefined) throw new UsageError('give --allow-cidr or --allow-any, not both')
  const allowlist = flags['allow-any'] === true ? [] : cidrs
  const rateLimit = rateLimitOf(flags, true)
  const permissions = permissionsOf(flags, true)
  if (allowlist === undefined && rateLimit === undefined && permissions === undefined) {
    throw new UsageError(
      'key update needs --allow-cidr C (repeatable) or --allow-any, --rate R --burst B or --clear-rate-limit, or --permission P (repeatable) or --unrestricted',
    )
  }
  const fields = { allowedCidrs: '--allow-cidr', permissions: '--permission', ...RATE_LIMIT_FIELDS }
  const updated = await keys.update(id, { actor, allowedCidrs: allowlist, rateLimit, permissions, fields })
  // What was changed, and only that: `{"id","allowedCidrs"}` for an allowlist alone, `{"id","permissions"}` for permissions (the contract's shapes).
  return {
    id: updated.id,
    ...(permissions === undefined ? {} : { permissions: updated.permissions }),
    ...(allowlist === undefined ? {} : { allowedCidrs: updated.allowedCidrs }),
    ...(rateLimit === undefined ? {} : { rateLimit: updated.rateLimit }),
  }
}
