class UsersController < ApplicationController
  def search
    # ruleid: rb-sql-injection
    @users = User.where("name LIKE '%#{params[:q]}%'")
    sql = "SELECT * FROM users WHERE id = " + params[:id]
    # ruleid: rb-sql-injection
    rows = ActiveRecord::Base.connection.execute(sql)
    # ruleid: rb-sql-injection
    DB.query("select * from users where email = '#{email}'")
    # ok: rb-sql-injection
    @users = User.where("name LIKE ?", "%#{params[:q]}%")
    # ok: rb-sql-injection
    @active = User.where(active: true).order(:name)
    # ok: rb-sql-injection
    logger.info("searched #{params[:q]}")
    rows
  end
end
