"""The C++ chunker on small synthetic sources: templates, nested braces, literals,
macros, constructors, operators and line numbers."""

from __future__ import annotations

import textwrap

from kernelpro_cute.chunker import (
    chunk_cpp,
    chunk_file,
    classify_header,
    function_name,
    mask_code,
    strip_template_prefix,
)


def _by_name(chunks):
    return {c.qualified: c for c in chunks}


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_mask_keeps_offsets_and_hides_literals_and_comments():
    text = src('''
        int a = 1; // { not a brace
        /* } nor this
           { */
        const char* s = "{ \\" }";
        char c = '{';
        #define X { \\
          }
        auto r = R"raw({ ) }")raw";
        int b = 1'000;
        ''')
    masked = mask_code(text)
    assert len(masked) == len(text)
    assert [i for i, ch in enumerate(text) if ch == "\n"] == [i for i, ch in enumerate(masked) if ch == "\n"]
    assert "{" not in masked and "}" not in masked
    assert "int a = 1;" in masked and "int b = 1'000;" in masked


def test_template_function_with_nested_braces_and_asm_braces():
    text = src('''
        // adds one
        template <class T, int N = (3 > 2)>
        CUTE_HOST_DEVICE constexpr
        auto add_one(T const& x, int y = 0) -> decltype(x + 1)
        {
          if (y) { for (int i = 0; i < 2; ++i) { y += i; } }
          asm volatile("{ .reg .pred p; }" ::);
          return x + 1;
        }
        int after() { return 2; }
        ''')
    chunks = _by_name(chunk_cpp(text))
    f = chunks["add_one"]
    assert f.kind == "function"
    assert (f.start_line, f.end_line) == (1, 9)  # the comment above is included
    assert "decltype(x + 1)" in f.signature
    assert (chunks["after"].start_line, chunks["after"].end_line) == (10, 10)


def test_classes_members_namespaces_and_specializations():
    text = src('''
        namespace cute {
        namespace detail {
        struct alignas(16) Bar : Base<int, 2> {
          int a_{0};
          Bar() : a_{1}, b_(2) { }
          void operator()(int x) const { a_ += x; }
          bool operator<(Bar const& o) const { return a_ < o.a_; }
         public:
          template <class U>
          struct Inner { U u; };
          using Alias = int;
        };
        }  // namespace detail
        template <>
        struct MMA_Traits<SM90_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>>
        {
          using ValTypeD = float;
        };
        using SM90_X = SM90::GMMA::MMA<1>;
        enum class Major { K = 0, MN = 1 };
        }  // namespace cute
        ''')
    chunks = chunk_cpp(text)
    names = _by_name(chunks)
    bar = names["cute::detail::Bar"]
    assert bar.kind == "struct" and (bar.start_line, bar.end_line) == (3, 12)
    assert names["cute::detail::Bar::Bar"].kind == "function"  # ctor with brace-init members
    assert (names["cute::detail::Bar::Bar"].start_line, names["cute::detail::Bar::Bar"].end_line) == (5, 5)
    assert "cute::detail::Bar::operator()" in names
    assert "cute::detail::Bar::operator<" in names
    assert names["cute::detail::Bar::Inner"].kind == "struct"
    traits = names["cute::MMA_Traits"]
    assert traits.kind == "struct" and (traits.start_line, traits.end_line) == (14, 18)
    assert "SM90_64x128x16_F32BF16BF16_SS" in traits.signature
    assert names["cute::SM90_X"].kind == "alias"
    assert names["cute::Major"].kind == "enum"
    # member aliases stay inside their class's chunk
    assert "cute::detail::Bar::Alias" not in names
    assert not any(c.symbol == "ValTypeD" for c in chunks)


def test_brace_default_arguments_stay_in_the_header():
    text = src('''
        struct Pipe {
          Pipe(Storage& s, Params p, Init = {}, Masks m = Masks{1, 2})
              : params_(p), ptr_{&s.bar[0]} {
            init();
          }
          int params_;
        };
        ''')
    names = _by_name(chunk_cpp(text))
    ctor = names["Pipe::Pipe"]
    assert (ctor.kind, ctor.start_line, ctor.end_line) == ("function", 2, 5)
    assert "Pipe::params_" not in names


def test_macros_kernels_and_extern_c():
    text = src('''
        #ifndef MY_HEADER_HPP
        #define MY_HEADER_HPP
        #define CUTE_THING(x) \\
          do { x; } while (0)
        extern "C" {
        int c_api(int v) { return v; }
        }
        __global__ void __launch_bounds__(128, 1) kernel(float* p) { p[0] = 1.f; }
        #endif
        ''')
    names = _by_name(chunk_cpp(text))
    assert "MY_HEADER_HPP" not in names  # include guards are not chunks
    macro = names["CUTE_THING"]
    assert macro.kind == "macro" and (macro.start_line, macro.end_line) == (3, 4)
    assert names["c_api"].kind == "function"
    assert names["kernel"].kind == "function" and names["kernel"].start_line == 8


def test_unbalanced_preprocessor_branches_do_not_lose_the_rest():
    text = src('''
        #if defined(A)
        void f(int a) {
        #else
        void f(long a) {
        #endif
          (void)a;
        }
        }
        int g() { return 1; }
        ''')
    names = _by_name(chunk_cpp(text))
    assert "g" in names


def test_header_helpers():
    assert strip_template_prefix("template <class T, class = enable_if_t<(N > 1)>> struct X") == "struct X"
    assert strip_template_prefix("template <> template <int N> void f()") == "void f()"
    assert function_name("CUTE_HOST_DEVICE auto foo(int x) -> decltype(x)") == "foo"
    assert function_name("Tensor<E, L>::iterator Tensor<E, L>::begin() const") == "begin"
    assert function_name("auto Layout::operator()(int i) const") == "Layout::operator()"
    assert function_name("friend bool operator==(A const& a, B const& b)") == "operator=="
    assert function_name("decltype(auto) make(int a)") == "make"
    assert classify_header("  if (x) ").kind == "other"
    assert classify_header("int table[] = ").kind == "other"
    assert classify_header("namespace cute ").name == "cute"
    assert classify_header("enum class Major : int ").kind == "enum"


def test_non_cpp_files_are_windowed():
    text = "\n".join(f"line {i}" for i in range(130))
    chunks = chunk_file("docs/notes.md", text)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 60), (61, 120), (121, 130)]
    assert all(c.kind == "text" for c in chunks)
    # a C++ file without any definition also falls back to windows
    assert chunk_file("a.h", "#include <x>\n")[0].kind == "text"
