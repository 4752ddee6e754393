/**
 * The API listener's certificate: TLS_CERT_FILE and TLS_KEY_FILE when given,
 * otherwise a self-signed development certificate for localhost, made once
 * under <project root>/.data/dev-tls/ and reused while it is valid. Replicas
 * starting at the same moment agree on one certificate: each writes its own
 * into a temporary directory and renames it into place, which succeeds for
 * exactly one of them; the others adopt the winner's.
 */
import { X509Certificate, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createSecureContext } from 'node:tls'
import { generate } from 'selfsigned'
import { ConfigError } from '@scoped/shared/config'

export interface TlsCredentials {
  cert: string
  key: string
  /** Where they came from, for the start-up log. */
  source: string
}

export interface TlsFiles {
  certFile: string
  keyFile: string
}

/** The API listener's protocol floor and TLS 1.2 suites: the stack's one list (shared/tls-ciphers.ts). */
export { MIN_TLS_VERSION, TLS12_CIPHERS } from '@scoped/shared/tls-ciphers'

const DEV_DIR = 'dev-tls'
const VALIDITY_DAYS = 365
/** Renew a development certificate this long before it expires. */
const RENEW_BEFORE_MS = 7 * 24 * 60 * 60 * 1000

function readFiles(files: TlsFiles): TlsCredentials {
  const cert = readFileSync(files.certFile, 'utf8')
  const key = readFileSync(files.keyFile, 'utf8')
  try {
    createSecureContext({ cert, key })
  } catch (error) {
    throw new ConfigError(
      'TLS_CERT_FILE',
      `certificate and TLS_KEY_FILE are not a matching PEM certificate and key (${error instanceof Error ? error.message : String(error)})`,
    )
  }
  return { cert, key, source: files.certFile }
}

function readDevCertificate(dir: string, now: Date): TlsCredentials | undefined {
  const certFile = join(dir, 'cert.pem')
  const keyFile = join(dir, 'key.pem')
  if (!existsSync(certFile) || !existsSync(keyFile)) return undefined
  try {
    const cert = readFileSync(certFile, 'utf8')
    const key = readFileSync(keyFile, 'utf8')
    const validTo = new Date(new X509Certificate(cert).validTo).getTime()
    if (validTo - now.getTime() < RENEW_BEFORE_MS) return undefined
    createSecureContext({ cert, key })
    return { cert, key, source: certFile }
  } catch {
    return undefined
  }
}

async function makeDevCertificate(now: Date): Promise<{ cert: string; key: string }> {
  const notAfterDate = new Date(now.getTime() + VALIDITY_DAYS * 24 * 60 * 60 * 1000)
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(now.getTime() - 60_000),
    notAfterDate,
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  })
  return { cert: pems.cert, key: pems.private }
}

/** The development certificate under `dataDir`, made when missing or about to expire. */
export async function developmentCertificate(dataDir: string, now = new Date()): Promise<TlsCredentials> {
  const dir = join(dataDir, DEV_DIR)
  const existing = readDevCertificate(dir, now)
  if (existing !== undefined) return existing
  mkdirSync(dataDir, { recursive: true })
  const made = await makeDevCertificate(now)
  const staging = join(dataDir, `${DEV_DIR}.${process.pid}.${randomBytes(4).toString('hex')}`)
  mkdirSync(staging)
  writeFileSync(join(staging, 'key.pem'), made.key, { mode: 0o600 })
  writeFileSync(join(staging, 'cert.pem'), made.cert)
  // An expired certificate is moved aside first; a rename onto a directory that exists fails.
  if (existsSync(dir) && readDevCertificate(dir, now) === undefined) rmSync(dir, { recursive: true, force: true })
  try {
    renameSync(staging, dir)
  } catch {
    rmSync(staging, { recursive: true, force: true })
  }
  const adopted = readDevCertificate(dir, now)
  if (adopted === undefined) throw new Error(`could not create a development certificate under ${dir}`)
  return adopted
}

export async function loadTlsCredentials(files: TlsFiles | null, dataDir: string): Promise<TlsCredentials> {
  return files === null ? developmentCertificate(dataDir) : readFiles(files)
}
