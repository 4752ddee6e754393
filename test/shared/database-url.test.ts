/**
 * DATABASE_URL and TLS to Postgres: `sslmode=verify-full&sslrootcert=<file>`
 * is what the deployment examples use. pg (pg-connection-string) turns it into
 * a TLS connection that checks the server's certificate against that CA and
 * its host name; `prefer`, `require` and `verify-ca` are read as
 * `verify-full` too (with a warning), unlike libpq; there is no fallback to
 * plain text. A file it names must exist when the process starts.
 */
import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'pg-connection-string'
import { ConfigError, readDatabaseUrl } from '@scoped/shared/config'

t.test('sslrootcert, sslcert and sslkey must name files that exist, said at start', async (t) => {
  const dir = t.testdir({})
  const ca = join(dir, 'postgres-ca.crt')
  writeFileSync(ca, '-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n')
  const url = `postgresql://gateway:secret@db.internal:5432/scoped?sslmode=verify-full&sslrootcert=${ca}`
  t.equal(readDatabaseUrl({ DATABASE_URL: url }).url, url)
  t.throws(
    () => readDatabaseUrl({ DATABASE_URL: `postgresql://gateway@db.internal/scoped?sslmode=verify-full&sslrootcert=${join(dir, 'missing.crt')}` }),
    ConfigError,
  )
  t.throws(
    () => readDatabaseUrl({ DATABASE_URL: `postgresql://gateway@db.internal/scoped?sslmode=verify-full&sslrootcert=${join(dir, 'missing.crt')}` }),
    /DATABASE_URL: sslrootcert file not found/,
  )
})

t.test('what pg makes of sslmode=verify-full with sslrootcert: TLS, that CA, the certificate and name checked', async (t) => {
  const dir = t.testdir({ 'ca.crt': 'THE CA\n' })
  const config = parse(`postgresql://gateway:secret@db.internal:5432/scoped?sslmode=verify-full&sslrootcert=${join(dir, 'ca.crt')}`)
  t.same(config.ssl, { ca: 'THE CA\n' }, 'TLS with that CA; rejectUnauthorized and the host name check keep their secure defaults')
  t.equal(parse('postgresql://gateway@db.internal/scoped?sslmode=disable').ssl, false, 'disable: plain text (only on a private network)')
})
