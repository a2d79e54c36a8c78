# Turns the kernel templates (src/codegen/cuda/kernels/*.cuh) into one C++ source holding their
# text, so the library carries the exact headers NVRTC compiles. Run by add_custom_command.
# Inputs: OUTPUT (the .cpp to write), HEADERS (;-separated list of .cuh paths).
set(body "// Generated at build time from src/codegen/cuda/kernels/*.cuh: the kernel templates' text.\n")
string(APPEND body "#include \"codegen/cuda/emit.hpp\"\n\nnamespace attnfuse::codegen::cuda {\n\n")
set(entries "")
set(index 0)
foreach(path IN LISTS HEADERS)
  get_filename_component(name "${path}" NAME)
  file(READ "${path}" text)
  string(APPEND body "static const char kHeader${index}[] = R\"attnfuse_embed(${text})attnfuse_embed\";\n")
  string(APPEND entries "      {\"${name}\", kHeader${index}},\n")
  math(EXPR index "${index} + 1")
endforeach()
string(APPEND body "\nconst std::vector<EmbeddedHeader>& kernel_headers() {\n  static const std::vector<EmbeddedHeader> headers = {\n${entries}  };\n  return headers;\n}\n\n}  // namespace attnfuse::codegen::cuda\n")
file(WRITE "${OUTPUT}.tmp" "${body}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
