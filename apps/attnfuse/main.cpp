// attnfuse command-line tool: `compile`, `run`, `bench` and `window-table` subcommands, and the
// one place where every failure becomes an exit code and a message.
//
// Exit codes: 0 success; 1 a --check (or bench validation) failed; 2 a user error; 3 a bug.
// A user error prints exactly one line to stderr, "attnfuse: error: <what is wrong>". The one
// exception: for program text errors (parse / verify) the library's source excerpt with the caret
// follows that line (as the library indents it), because pointing at the offending text is the useful part; the
// first line alone still says what is wrong and where ("line L, column C").
#include <cstdio>
#include <new>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "attnfuse/error.hpp"
#include "attnfuse/version.hpp"
#include "commands.hpp"

namespace {

using attnfuse::Error;
using attnfuse::ErrorCode;

constexpr int kExitUserError = 2;
constexpr int kExitBug = 3;

std::string first_line(const std::string& s, std::string* rest) {
  const size_t nl = s.find('\n');
  if (nl == std::string::npos) {
    if (rest) rest->clear();
    return s;
  }
  if (rest) *rest = s.substr(nl + 1);
  return s.substr(0, nl);
}

std::string flatten(const std::string& s) {
  std::string out;
  for (char ch : s) out += (ch == '\n') ? std::string(" | ") : std::string(1, ch);
  while (out.size() >= 3 && out.compare(out.size() - 3, 3, " | ") == 0) out.resize(out.size() - 3);
  return out;
}

int user_error(const std::string& line) {
  std::fputs(fmt::format("attnfuse: error: {}\n", line).c_str(), stderr);
  return kExitUserError;
}

int report(const Error& e) {
  const std::string msg = e.what();
  switch (e.code()) {
    case ErrorCode::Internal:
      std::fputs(fmt::format("attnfuse: internal error (a bug in attnfuse, please report it): {}\n",
                             flatten(msg)).c_str(), stderr);
      return kExitBug;
    case ErrorCode::Parse:
    case ErrorCode::Verify: {
      std::string rest;
      const std::string head = first_line(msg, &rest);
      const int rc = user_error(fmt::format("{}: {}", attnfuse::error_code_name(e.code()), head));
      // The caret excerpt (already indented by the library), if it gave one.
      size_t start = 0;
      while (start < rest.size()) {
        size_t nl = rest.find('\n', start);
        if (nl == std::string::npos) nl = rest.size();
        std::fputs(fmt::format("{}\n", rest.substr(start, nl - start)).c_str(), stderr);
        start = nl + 1;
      }
      return rc;
    }
    case ErrorCode::Io:
    case ErrorCode::Device:
      return user_error(flatten(msg));  // these messages name the file / device themselves
    default:
      return user_error(fmt::format("{}: {}", attnfuse::error_code_name(e.code()), flatten(msg)));
  }
}

int dispatch(int argc, char** argv) {
  using namespace attnfuse::cli;
  CLI::App app{"attnfuse: an attention compiler. Write an attention variant as a composition of "
               "combinators, e.g. 'softmax(causal(scaled_dot_product(Q, K))) @ V'; attnfuse "
               "verifies it, compiles it to one fused kernel and runs it.",
               "attnfuse"};
  app.footer("Exit codes: 0 ok, 1 check failed, 2 user error (one line on stderr), 3 internal error.\n"
             "PROGRAM is the program text itself, or @file to read it from a file.");
  app.set_version_flag("--version", std::string("attnfuse ") + ATTNFUSE_VERSION);
  app.require_subcommand(1);

  CompileCommand compile;
  add_compile_command(*app.add_subcommand("compile", "print the canonical IR, the IR after each pass, "
                                                     "or the KernelSpec of a program"),
                      compile);
  RunCommand run;
  add_run_command(*app.add_subcommand("run", "run a program on .npy inputs (or random ones with --shape), "
                                             "optionally checked against the float64 reference"),
                  run);
  BenchCommand bench;
  add_bench_command(*app.add_subcommand("bench", "time a program (median of many runs) after checking "
                                                 "it; --ablate times the decomposition variants"),
                    bench);
  WindowTableCommand window_table;
  add_window_table_command(*app.add_subcommand("window-table", "print the ATFlash rope_window table of a "
                                                               "model's RoPE (per pair theta, lambda, "
                                                               "window) and its predicted pruned share"),
                           window_table);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return user_error(flatten(e.what()) + " (see attnfuse --help)");
  }
  for (int i = 0; i < argc; ++i) bench.command_line += (i ? " " : "") + std::string(argv[i]);

  if (app.got_subcommand("compile")) return run_compile(compile);
  if (app.got_subcommand("run")) return run_run(run);
  if (app.got_subcommand("window-table")) return run_window_table(window_table);
  return run_bench(bench);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (const Error& e) {
    return report(e);
  } catch (const attnfuse::cli::UsageError& e) {
    return user_error(flatten(e.what()));
  } catch (const std::bad_alloc&) {
    return user_error("out of memory: the tensors of this problem do not fit (try smaller shapes)");
  } catch (const std::exception& e) {
    std::fputs(fmt::format("attnfuse: internal error (a bug in attnfuse, please report it): {}\n",
                           flatten(e.what())).c_str(), stderr);
    return kExitBug;
  } catch (...) {
    std::fputs("attnfuse: internal error (a bug in attnfuse, please report it): unknown exception\n", stderr);
    return kExitBug;
  }
}
