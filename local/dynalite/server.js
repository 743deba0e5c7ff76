// Starts dynalite (a DynamoDB-API server) on 127.0.0.1. The dynalite CLI's --port 0
// does not pick a free port, so this script listens on the given port (0 = any free
// one) and prints the chosen port as the first line on stdout, which the stack reads.
//
// usage: node server.js [--port N] [--path DIR] [--port-file FILE]
// --port-file also writes the port to FILE (atomically), for callers that detach.
'use strict'
const fs = require('fs')
const dynalite = require('dynalite')

const args = process.argv.slice(2)
const opt = (name) => {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}
const port = Number(opt('--port') || 0)
const path = opt('--path')
const portFile = opt('--port-file')

const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, path })
server.listen(port, '127.0.0.1', (err) => {
  if (err) {
    console.error(`dynalite: ${err.message}`)
    process.exit(1)
  }
  const chosen = String(server.address().port)
  if (portFile) {
    fs.writeFileSync(portFile + '.tmp', chosen + '\n')
    fs.renameSync(portFile + '.tmp', portFile)
  }
  console.log(chosen)
})
// dynalite throws from a request's 'error' handler when a client aborts a request
// mid-body (a cancelled context, a killed sweeper), which would end the process.
// DynamoDB shrugs that off; so does this server.
process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) {
    console.error(`dynalite: a client aborted a request (${err.message})`)
    return
  }
  console.error(err)
  process.exit(1)
})

const stop = () => server.close(() => process.exit(0))
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
