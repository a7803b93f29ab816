// kvplan::Error -> Python. Bad input (the CLI's exit code 2) raises kvplan.InputError, a subclass
// of both kvplan.Error and ValueError; every other code raises kvplan.Error. Both carry `.code`
// (core/error.h's name, e.g. "invalid_argument") and the same one-line message the CLI prints.
#include <Python.h>

#include <string>

#include "core/error.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace kvplan::python {
namespace {

PyObject* g_error = nullptr;
PyObject* g_input_error = nullptr;

void raise(const Error& e) {
  PyObject* type = is_bad_input(e.code()) ? g_input_error : g_error;
  const std::string message = one_line(e.what());
  PyObject* value = PyObject_CallFunction(type, "s", message.c_str());
  if (value == nullptr) return;  // the call set its own exception
  PyObject* code = PyUnicode_FromStringAndSize(
      error_code_name(e.code()).data(), static_cast<Py_ssize_t>(error_code_name(e.code()).size()));
  if (code != nullptr) {
    PyObject_SetAttrString(value, "code", code);
    Py_DECREF(code);
  }
  PyErr_SetObject(type, value);
  Py_DECREF(value);
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_error = PyErr_NewExceptionWithDoc("kvplan._kvplan.Error",
                                      "A kvplan operation failed; `.code` names why.",
                                      PyExc_RuntimeError, nullptr);
  nb::object bases = nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError));
  g_input_error = PyErr_NewExceptionWithDoc(
      "kvplan._kvplan.InputError", "Bad input (a file, field or option): the CLI's exit code 2.",
      bases.ptr(), nullptr);
  m.attr("Error") = nb::handle(g_error);
  m.attr("InputError") = nb::handle(g_input_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      raise(e);
    }
  });
}

}  // namespace kvplan::python
