#!/usr/bin/env bash
# The twenty-ninth session's third device call (carry .devcarry and .devcarry-base as for the
# first): the row-group skipping loop as its own module (TileConfig::skip_row_groups), taken
# per call only for masks with such blocks. The same steps as the first call, on that build:
# the whole GPU suite, BigBird base / new, then --suite bigbird with the peers.
exec bash "$(dirname "$0")/run_gpu_session29_first.sh" "$@"
