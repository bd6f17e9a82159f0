class Converter
  def convert(file, host)
    # ruleid: rb-command-injection
    system("convert #{file} out.png")
    # ruleid: rb-command-injection
    out = `ping -c 1 #{host}`
    # ruleid: rb-command-injection
    IO.popen("tar czf backup.tgz " + params[:dir])
    # ok: rb-command-injection
    system("convert", file, "out.png")
    # ok: rb-command-injection
    system("uptime")
    # ok: rb-command-injection
    system("ping -c 1 #{Shellwords.escape(host)}")
    out
  end
end
