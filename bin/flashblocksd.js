#!/usr/bin/env node
// The `flashblocksd` command: runs the compiled daemon (npm run build produces dist/).
import '../dist/src/main.js';
