/**
 * A backend's TLS settings are read once at start, and a bad one stops it
 * with a line naming the variable: mutual TLS without TLS, a client CA file
 * that holds no certificate, a health port equal to the service's.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { readBackendTls, readHealthPort, transportOf } from '@scoped/shared/backend-server'
import { issueCertificate, makeCa } from '../helpers/tls-ca.js'

const dir = t.testdir({})
const ca = await makeCa(dir)
const server = await issueCertificate(ca, dir, 'server', { usage: 'server' })
const junk = join(dir, 'junk.pem')
writeFileSync(junk, 'not a certificate\n')
const files = { RESOURCE_SERVICE_TLS_CERT_FILE: server.certFile, RESOURCE_SERVICE_TLS_KEY_FILE: server.keyFile }

t.test('how a backend listens', async (t) => {
  t.equal(transportOf(readBackendTls({}, 'RESOURCE_SERVICE')), 'http', 'nothing set: plain HTTP (npm start, on loopback)')
  t.equal(transportOf(readBackendTls(files, 'RESOURCE_SERVICE')), 'tls', 'certificate and key: TLS')
  const mutual = readBackendTls({ ...files, RESOURCE_SERVICE_TLS_CLIENT_CA_FILE: ca.certFile }, 'RESOURCE_SERVICE')
  t.equal(transportOf(mutual), 'mutual-tls', 'and a client CA: mutual TLS')
  t.equal(mutual?.clientCa, ca.cert)
})

t.test('bad TLS settings stop the backend, naming the variable', async (t) => {
  const rows: Array<[string, Record<string, string>, RegExp]> = [
    [
      'a client CA without TLS',
      { RESOURCE_SERVICE_TLS_CLIENT_CA_FILE: ca.certFile },
      /^RESOURCE_SERVICE_TLS_CLIENT_CA_FILE: needs RESOURCE_SERVICE_TLS_CERT_FILE/,
    ],
    [
      'a client CA file that is missing',
      { ...files, RESOURCE_SERVICE_TLS_CLIENT_CA_FILE: join(dir, 'absent.pem') },
      /^RESOURCE_SERVICE_TLS_CLIENT_CA_FILE: file not found/,
    ],
    [
      'a client CA file without a certificate',
      { ...files, RESOURCE_SERVICE_TLS_CLIENT_CA_FILE: junk },
      /^RESOURCE_SERVICE_TLS_CLIENT_CA_FILE: .* holds no PEM certificate/,
    ],
    ['a key without a certificate', { RESOURCE_SERVICE_TLS_KEY_FILE: server.keyFile }, /^RESOURCE_SERVICE_TLS_CERT_FILE: is required/],
  ]
  for (const [what, env, message] of rows) t.throws(() => readBackendTls(env, 'RESOURCE_SERVICE'), { name: 'ConfigError', message }, what)
})

t.test('the health listener’s port', async (t) => {
  t.equal(readHealthPort({}, 'AGENCY_SERVICE', 4001), undefined, 'unset: the probes use the service’s own listener')
  t.equal(readHealthPort({ AGENCY_SERVICE_HEALTH_PORT: '4011' }, 'AGENCY_SERVICE', 4001), 4011)
  t.throws(() => readHealthPort({ AGENCY_SERVICE_HEALTH_PORT: '4001' }, 'AGENCY_SERVICE', 4001), {
    message: /^AGENCY_SERVICE_HEALTH_PORT: must differ from AGENCY_SERVICE_PORT/,
  })
  t.throws(() => readHealthPort({ AGENCY_SERVICE_HEALTH_PORT: 'x' }, 'AGENCY_SERVICE', 4001), { message: /^AGENCY_SERVICE_HEALTH_PORT: must be a port number/ })
})
